//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/ref"
)

// Op wrappers of norm.wgsl.

// RMSNorm records out = w ⊙ x / sqrt(mean(x²) + eps) for rows rows of n
// values (ref.RMSNorm). out may equal x.
func (d *Device) RMSNorm(out, x, w View, rows, n int, eps float32) error {
	return d.rmsnorm(out, x, x, w, rows, n, eps, 0)
}

// RMSNormGated records out = RMSNorm(x) ⊙ act(g) with act σ or SiLU
// (ref.RMSNormGated). out may equal x.
func (d *Device) RMSNormGated(out, x, g, w View, rows, n int, eps float32, act ref.GateAct) error {
	mode := 1
	if act == ref.GateSiLU {
		mode = 2
	}
	if err := g.check(rows*n, "RMSNormGated g"); err != nil {
		return err
	}
	return d.rmsnorm(out, x, g, w, rows, n, eps, mode)
}

func (d *Device) rmsnorm(out, x, g, w View, rows, n int, eps float32, mode int) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: RMSNorm: %d rows of %d", rows, n)
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{x, rows * n, "x"}, {w, n, "w"}, {out, rows * n, "out"}} {
		if err := c.v.check(c.words, "RMSNorm", c.name); err != nil {
			return err
		}
	}
	k, err := d.kernel("norm.wgsl", "rmsnorm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, mode).f(eps, 1).u(x.Off, n, g.Off, n, w.Off, out.Off, n)
	gb := g.Buf
	if mode == 0 {
		gb = nil // unused: a placeholder binding
	}
	return d.dispatch(k, p, []*Buffer{x.Buf, gb, w.Buf, out.Buf}, rows)
}

// L2Norm records out = x / sqrt(Σx² + eps) · scale per row of d values
// (ref.L2Norm, which works in place: pass out = x).
func (d *Device) L2Norm(out, x View, rows, n int, eps, scale float32) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: L2Norm: %d rows of %d", rows, n)
	}
	if err := x.check(rows*n, "L2Norm x"); err != nil {
		return err
	}
	if err := out.check(rows*n, "L2Norm out"); err != nil {
		return err
	}
	k, err := d.kernel("norm.wgsl", "l2norm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, 0).f(eps, scale).u(x.Off, n, x.Off, n, x.Off, out.Off, n)
	return d.dispatch(k, p, []*Buffer{x.Buf, nil, nil, out.Buf}, rows) // l2norm reads no g or w
}

// RMSNormRows is RMSNorm over rows with explicit row strides for x and out
// (e.g. normalising the c_kv part of latent-cache rows in place).
func (d *Device) RMSNormRows(out, x Strided, w View, rows, n int, eps float32) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: RMSNormRows: %d rows of %d", rows, n)
	}
	if err := x.check(rows, n, "RMSNormRows x"); err != nil {
		return err
	}
	if err := out.check(rows, n, "RMSNormRows out"); err != nil {
		return err
	}
	if err := w.check(n, "RMSNormRows w"); err != nil {
		return err
	}
	k, err := d.kernel("norm.wgsl", "rmsnorm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, 0).f(eps, 1).u(x.Off, x.Stride, x.Off, x.Stride, w.Off, out.Off, out.Stride)
	return d.dispatch(k, p, []*Buffer{x.Buf, nil, w.Buf, out.Buf}, rows) // mode 0 reads no g
}

// RMSNormCacheRows records RMSNorm (weight w, eps) of the first n floats of
// cache rows [row0, row0+n), in place, page by page.
func (d *Device) RMSNormCacheRows(c *LatentCache, row0, rows, n int, w View, eps float32) error {
	if row0 < 0 || row0+rows > c.Len {
		return fmt.Errorf("wgsl: RMSNormCacheRows %d..%d of %d cached rows", row0, row0+rows, c.Len)
	}
	for s := range c.spans(row0, rows) {
		v := s.page.At(s.local * c.Width).Rows(c.Width)
		if err := d.RMSNormRows(v, v, w, s.n, n, eps); err != nil {
			return err
		}
	}
	return nil
}
