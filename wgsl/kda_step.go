//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"errors"
	"fmt"
)

// Op wrappers of kda_step.wgsl.

// kdaStepDKMax is the largest head KDAStep takes (the kernel's workgroup
// arrays hold a head's q, k, v and decay).
const kdaStepDKMax = 256

// KDAStepArgs are the operands of KDAStep, one decoded token of H heads of
// dk (= dv): X holds the projections [q | k | v] (3·H·dk words), Beta (H
// words) and the gate's input Gate.FA in the same buffer; Conv the conv
// weights [3, H·dk, K]; Tails the conv tails, tensor j's [K−1, H·dk] at
// Tails + j·TailStep; S the state [H, dk, dk] (updated in place); O the
// output [H·dk]. The gate is Gate.W (f_b) with Gate.E as its epilogue;
// Gate.G is not written (the gate never leaves the kernel).
type KDAStepArgs struct {
	H, DK, K, TailStep int
	QScale, Eps        float32
	X, Beta, Conv      View
	Tails, S, O        View
	Gate               KDAPrepGate
}

// KDAStep records a decoded token's KDA mixer core in one dispatch
// (kda_step.wgsl): KDAPrep's conv, L2 norms, σ(β) and gate, then the
// delta rule of KDARecurrent, one workgroup per head.
func (d *Device) KDAStep(a *KDAStepArgs) error {
	if err := a.check(); err != nil {
		return err
	}
	H, dk, K, W, e := a.H, a.DK, a.K, a.Gate.W, a.Gate.E
	k, err := d.weightKernel("kda_step.wgsl", "main", 7, W.DType)
	if err != nil {
		return err
	}
	p := params{}.u(H, dk, K, a.X.Off, a.Beta.Off, a.Conv.Off, a.Tails.Off, a.TailStep, a.S.Off, a.O.Off).f(a.QScale, a.Eps).
		u(W.Cols, int(W.DType), W.Off, W.Stride, a.Gate.FA.Off, e.DtBias.Off, e.ALog.Off, b2i(e.PerChannel), b2i(e.Bounded)).f(e.LowerBound)
	bufs := []*Buffer{a.X.Buf, a.Conv.Buf, a.Tails.Buf, a.S.Buf, a.O.Buf, W.Buf, e.DtBias.Buf}
	return d.dispatchXY(k, p, bufs, H, 1)
}

// check validates a's sizes and views.
func (a *KDAStepArgs) check() error {
	if a == nil {
		return fmt.Errorf("wgsl: KDAStep: no arguments")
	}
	H, dk, K := a.H, a.DK, a.K
	C := H * dk
	switch {
	case H <= 0 || dk <= 0 || K < 2:
		return fmt.Errorf("wgsl: KDAStep: H %d, dk %d, K %d", H, dk, K)
	case dk > kdaStepDKMax:
		return fmt.Errorf("wgsl: KDAStep: heads of %d values (at most %d)", dk, kdaStepDKMax)
	case H > maxGroups:
		return fmt.Errorf("wgsl: KDAStep: %d heads", H)
	case a.Beta.Buf != a.X.Buf:
		return fmt.Errorf("wgsl: KDAStep: β must be in the projections' buffer")
	case a.TailStep < (K-1)*C:
		return fmt.Errorf("wgsl: KDAStep: tail step %d for %d channels", a.TailStep, C)
	case a.Gate.W != nil && (a.Gate.W.Cols+1)/2 > loopBudget:
		return fmt.Errorf("wgsl: KDAStep: a gate of %d columns exceeds the per-invocation loop budget", a.Gate.W.Cols)
	case a.Gate.E.DtBias.Buf != a.Gate.E.ALog.Buf:
		return fmt.Errorf("wgsl: KDAStep: dt_bias and A_log must share a buffer")
	}
	return errors.Join(a.Gate.check(a.X, H, dk), a.X.check(3*C, "KDAStep x"), a.Beta.check(H, "KDAStep beta"),
		a.Conv.check(3*C*K, "KDAStep conv"), a.Tails.check(2*a.TailStep+(K-1)*C, "KDAStep tails"),
		a.S.check(H*dk*dk, "KDAStep state"), a.O.check(C, "KDAStep out"))
}
