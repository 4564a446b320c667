//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/ref"
)

// Op wrappers of elementwise.wgsl.

// GLU records out = act(gate, up) (ref.Act.GLU: SiLU-GLU or SiTU-GLU) over
// rows×n elements; each operand has its own row stride, so gate and up may
// be the two halves of one fused projection.
func (d *Device) GLU(out, gate, up Strided, rows, n int, act ref.Act) error {
	mode := 0
	if act.SiTU {
		mode = 1
		if act.Beta == 0 {
			return fmt.Errorf("wgsl: GLU: SiTU with β = 0")
		}
	}
	return d.elementwise("glu", out, gate, up, rows, n, mode, 0, act.Beta, act.BetaLin)
}

// Add records out = x + a·y over n contiguous elements (residual add with
// a = 1). out may equal x or y.
func (d *Device) Add(out, x, y View, n int, a float32) error {
	return d.elementwise("add", out.Rows(n), x.Rows(n), y.Rows(n), 1, n, 0, a, 0, 0)
}

// Axpy records y += a·x over n elements (ref.Axpy).
func (d *Device) Axpy(a float32, x, y View, n int) error { return d.Add(y, y, x, n, a) }

// Copy records out = x over rows×n elements with row strides.
func (d *Device) Copy(out, x Strided, rows, n int) error {
	return d.elementwise("copy", out, x, x, rows, n, 0, 0, 0, 0)
}

func (d *Device) elementwise(entry string, out, x, y Strided, rows, n, mode int, a, beta, betaLin float32) error {
	if rows <= 0 || n <= 0 {
		return nil
	}
	if err := x.check(rows, n, entry, "x"); err != nil {
		return err
	}
	if err := y.check(rows, n, entry, "y"); err != nil {
		return err
	}
	if err := out.check(rows, n, entry, "out"); err != nil {
		return err
	}
	k, err := d.kernel("elementwise.wgsl", entry, 3)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, mode).f(a, beta, betaLin).u(x.Off, x.Stride, y.Off, y.Stride, out.Off, out.Stride)
	yb := y.Buf
	if entry == "copy" || mode == 3 {
		yb = nil // y unused: a placeholder binding
	}
	return d.dispatch(k, p, []*Buffer{x.Buf, yb, out.Buf}, (rows*n+255)/256)
}

// SigmoidGate records out = σ(g) ⊙ y over rows×n elements (the MLA output
// gate: o ⊙ σ(g_proj x)). out may equal y.
func (d *Device) SigmoidGate(out, g, y Strided, rows, n int) error {
	return d.elementwise("glu", out, g, y, rows, n, 2, 0, 0, 0)
}

// Sigmoid records out = σ(x) over rows×n elements (KDA β). out may equal x.
func (d *Device) Sigmoid(out, x Strided, rows, n int) error {
	return d.elementwise("glu", out, x, x, rows, n, 3, 0, 0, 0)
}
