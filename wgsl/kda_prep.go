//go:build cgo || js

package wgsl

import (
	"fmt"
)

// Op wrappers of kda_prep.wgsl.

// KDAPrep records, for one decoded token, the KDA inputs from its
// projections — the fused form of three ShortConv (T = 1), two L2Norm and a
// Sigmoid (kda_prep.wgsl): for j = q, k, v, out_j = SiLU(conv of [tail_j;
// x_j]) with the tail shifted; out_q, out_k L2-normalised per head of dk
// (eps), out_q also times qScale; β = σ(β) in place. x holds [q | k | v]
// (3·H·dk words) and β (H words) in the same buffer; w the conv weights
// [3, H·dk, K]; the tails are [K−1, H·dk] each, tails words apart from
// state; outputs are H·dk words each, outStep apart from out.
func (d *Device) KDAPrep(out View, outStep int, x, beta, w, state View, tails, H, dk, K int, qScale, eps float32) error {
	C := H * dk
	switch {
	case H <= 0 || dk <= 0 || K < 2:
		return fmt.Errorf("wgsl: KDAPrep: H %d, dk %d, K %d", H, dk, K)
	case beta.Buf != x.Buf:
		return fmt.Errorf("wgsl: KDAPrep: β must be in the projections' buffer")
	case outStep < C || tails < (K-1)*C:
		return fmt.Errorf("wgsl: KDAPrep: output step %d, tail step %d for %d channels", outStep, tails, C)
	}
	if err := x.check(3*C, "KDAPrep x"); err != nil {
		return err
	}
	if err := beta.check(H, "KDAPrep beta"); err != nil {
		return err
	}
	if err := w.check(3*C*K, "KDAPrep w"); err != nil {
		return err
	}
	if err := state.check(2*tails+(K-1)*C, "KDAPrep state"); err != nil {
		return err
	}
	if err := out.check(2*outStep+C, "KDAPrep out"); err != nil {
		return err
	}
	k, err := d.kernel("kda_prep.wgsl", "main", 4)
	if err != nil {
		return err
	}
	p := params{}.u(H, dk, K, x.Off, beta.Off, w.Off, state.Off, tails, out.Off, outStep).f(qScale, eps)
	return d.dispatch(k, p, []*Buffer{x.Buf, w.Buf, state.Buf, out.Buf}, 3*H)
}
