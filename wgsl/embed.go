//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
)

// Op wrappers of embed.wgsl.

// Embed records the embedding gather out[t] = table[ids[t]] (tensor.Mat.Row)
// for T token ids held as u32 in ids; out rows are out.Stride words apart
// (e.g. straight into an AttnRes block slot). The table keeps its dtype on
// the GPU. Ids outside [0, table.Rows) give zero rows: validate on the host.
func (d *Device) Embed(out Strided, table *Mat, ids View, T int) error {
	if T <= 0 {
		return fmt.Errorf("wgsl: Embed: %d tokens", T)
	}
	if table != nil && len(table.Parts) > 0 {
		// each part gathers the ids in its row range; the first also
		// writes the zero rows of ids outside the table
		r0 := 0
		for _, p := range table.Parts {
			if err := d.embed(out, p, ids, T, r0, table.Rows); err != nil {
				return err
			}
			r0 += p.Rows
		}
		return nil
	}
	return d.embed(out, table, ids, T, 0, 0)
}

// embed gathers the ids in [row0, row0+table.Rows) from table, a part of a
// matrix of total rows (0: table is whole).
func (d *Device) embed(out Strided, table *Mat, ids View, T, row0, total int) error {
	if err := table.check("Embed table"); err != nil {
		return err
	}
	if err := ids.check(T, "Embed ids"); err != nil {
		return err
	}
	n := table.Cols
	if err := out.check(T, n, "Embed out"); err != nil {
		return err
	}
	k, err := d.weightKernel("embed.wgsl", "main", 3, table.DType)
	if err != nil {
		return err
	}
	p := params{}.u(n, T, int(table.DType), table.Rows, table.Off, table.Stride, ids.Off, out.Off, out.Stride, row0, total)
	return d.dispatch(k, p, []*Buffer{table.Buf, ids.Buf, out.Buf}, (T*n+255)/256)
}
