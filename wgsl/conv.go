//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
)

// Op wrappers of conv.wgsl.

// ShortConv records the short causal depthwise conv + SiLU with carried
// state (ref.ShortConv): x, out [T, C], w [C, K], state [K−1, C] updated in
// place. out must not overlap x or state. Long pieces are split into several
// dispatches (channels are independent, so state carries between them).
func (d *Device) ShortConv(out, x, w, state View, T, C, K int) error {
	if T <= 0 {
		return nil
	}
	if C <= 0 || K < 2 {
		return fmt.Errorf("wgsl: ShortConv: C %d, K %d", C, K)
	}
	if err := x.check(T*C, "ShortConv x"); err != nil {
		return err
	}
	if err := out.check(T*C, "ShortConv out"); err != nil {
		return err
	}
	if err := w.check(C*K, "ShortConv w"); err != nil {
		return err
	}
	if err := state.check((K-1)*C, "ShortConv state"); err != nil {
		return err
	}
	k, err := d.kernel("conv.wgsl", "main", 4)
	if err != nil {
		return err
	}
	step := max(1, loopBudget/(K+2)-K)
	for t0 := 0; t0 < T; t0 += step {
		n := min(step, T-t0)
		p := params{}.u(n, C, K, x.Off+t0*C, w.Off, state.Off, out.Off+t0*C)
		if err := d.dispatch(k, p, []*Buffer{x.Buf, w.Buf, state.Buf, out.Buf}, (C+63)/64); err != nil {
			return err
		}
	}
	return nil
}
