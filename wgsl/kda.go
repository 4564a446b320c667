//go:build cgo || (js && !cpuonly)

package wgsl

import "fmt"

// Op wrappers of kda.wgsl.

// KDAArgs are the GPU operands of a KDA recurrence, laid out as in
// ref.KDAArgs: Q, K, G [T, H·DK], V, O [T, H·DV], Beta [T, H], S [H, DK, DV]
// (updated in place).
type KDAArgs struct {
	T, H, DK, DV           int
	Q, K, V, G, Beta, O, S View
}

// KDARecurrent records the KDA delta-rule recurrence token by token
// (ref.KDARecurrent) with one invocation per (head, value column). Many
// tokens (prefill through the recurrent form) are split into dispatches of
// at most loopBudget/(2·DK) tokens, each continuing from the state the
// previous one wrote.
func (d *Device) KDARecurrent(a *KDAArgs) error {
	if err := a.check("KDARecurrent"); err != nil {
		return err
	}
	T, H, dk, dv := a.T, a.H, a.DK, a.DV
	k, err := d.kernel("kda.wgsl", "main", 7)
	if err != nil {
		return err
	}
	step := max(1, loopBudget/(2*dk+2))
	bufs := []*Buffer{a.Q.Buf, a.K.Buf, a.V.Buf, a.G.Buf, a.Beta.Buf, a.O.Buf, a.S.Buf}
	for t0 := 0; t0 < T; t0 += step {
		n := min(step, T-t0)
		p := params{}.u(n, H, dk, dv, a.Q.Off+t0*H*dk, a.K.Off+t0*H*dk, a.V.Off+t0*H*dv, a.G.Off+t0*H*dk,
			a.Beta.Off+t0*H, a.O.Off+t0*H*dv, a.S.Off)
		if err := d.dispatchXY(k, p, bufs, (dv+63)/64, H); err != nil {
			return err
		}
	}
	return nil
}

// check validates a's sizes and views for the op named what.
func (a *KDAArgs) check(what string) error {
	if a == nil {
		return fmt.Errorf("wgsl: %s: no arguments", what)
	}
	T, H, dk, dv := a.T, a.H, a.DK, a.DV
	if T <= 0 || H <= 0 || dk <= 0 || dv <= 0 {
		return fmt.Errorf("wgsl: %s: bad sizes T=%d H=%d DK=%d DV=%d", what, T, H, dk, dv)
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{a.Q, T * H * dk, "Q"}, {a.K, T * H * dk, "K"}, {a.G, T * H * dk, "G"}, {a.V, T * H * dv, "V"},
		{a.O, T * H * dv, "O"}, {a.Beta, T * H, "Beta"}, {a.S, H * dk * dv, "S"}} {
		if err := c.v.check(c.words, what, c.name); err != nil {
			return err
		}
	}
	if H > maxGroups {
		return fmt.Errorf("wgsl: %s: %d heads", what, H)
	}
	return nil
}
