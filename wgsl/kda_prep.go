//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"errors"
	"fmt"

	"github.com/tessera-llm/tessera/core/tensor"
)

// Op wrappers of kda_prep.wgsl.

// KDAPrep records, for one decoded token, the KDA inputs from its
// projections — the fused form of three ShortConv (T = 1), two L2Norm and a
// Sigmoid (kda_prep.wgsl): for j = q, k, v, out_j = SiLU(conv of [tail_j;
// x_j]) with the tail shifted; out_q, out_k L2-normalised per head of dk
// (eps), out_q also times qScale; β = σ(β) in place. x holds [q | k | v]
// (3·H·dk words) and β (H words) in the same buffer; w the conv weights
// [3, H·dk, K]; the tails are [K−1, H·dk] each, tails words apart from
// state; outputs are H·dk words each, outStep apart from out. With gate
// not nil the same dispatch computes the step's KDA gate (as
// LinearKDAGate).
func (d *Device) KDAPrep(out View, outStep int, x, beta, w, state View, tails, H, dk, K int, qScale, eps float32, gate *KDAPrepGate) error {
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
	p := params{}.u(H, dk, K, x.Off, beta.Off, w.Off, state.Off, tails, out.Off, outStep).f(qScale, eps)
	bufs := []*Buffer{x.Buf, w.Buf, state.Buf, out.Buf, nil, nil, nil}
	groups, dt := 3*H, tensor.F32
	if gate != nil {
		if err := gate.check(x, H, dk); err != nil {
			return err
		}
		W, e := gate.W, gate.E
		p = p.u(1, W.Rows, W.Cols, int(W.DType), W.Off, W.Stride, gate.FA.Off, gate.G.Off, e.DtBias.Off, e.ALog.Off,
			b2i(e.PerChannel), b2i(e.Bounded)).f(e.LowerBound)
		bufs[4], bufs[5], bufs[6] = W.Buf, e.DtBias.Buf, gate.G.Buf
		groups, dt = 3*H+(W.Rows+15)/16, W.DType
	}
	k, err := d.weightKernel("kda_prep.wgsl", "main", 7, dt)
	if err != nil {
		return err
	}
	return d.dispatch(k, p, bufs, groups)
}

// KDAPrepGate is the KDA gate KDAPrep may compute in its dispatch:
// G = KDAGate(FA·Wᵀ) with W = f_b_proj (H·dk rows) and FA = f_a_proj's
// output, which must be in the projections' buffer.
type KDAPrepGate struct {
	G, FA View
	W     *Mat
	E     KDAGateEpilogue
}

// check validates g for KDAPrep's projections x and heads H×dk: the
// dispatch takes it whole, so the GPU backend falls back to LinearKDAGate
// when it fails.
func (g *KDAPrepGate) check(x View, H, dk int) error {
	switch {
	case g.W == nil || len(g.W.Parts) > 0 || g.E.H != H || g.E.DK != dk:
		return fmt.Errorf("wgsl: KDAPrep: a gate matrix of %d×%d channels in one part", H, dk)
	case g.FA.Buf != x.Buf:
		return fmt.Errorf("wgsl: KDAPrep: the gate's input must be in the projections' buffer")
	case (g.W.Cols+1)/2/8 > loopBudget:
		return fmt.Errorf("wgsl: KDAPrep: a gate of %d columns exceeds the per-invocation loop budget", g.W.Cols)
	}
	if err := g.E.check("KDAPrep gate", g.W); err != nil {
		return err
	}
	return errors.Join(g.W.check("KDAPrep gate"), g.FA.check(g.W.Cols, "KDAPrep gate input"), g.G.check(H*dk, "KDAPrep gate"))
}
