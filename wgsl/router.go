//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/ref"
)

// Op wrappers of router.wgsl.

// Route records the MoE router (ref.Router.Route: sigmoid or softmax
// scores) for T tokens:
// logits [T, E], bias [E] (a zero View for none), idx [T, TopK] as u32
// expert ids, w [T, TopK] weights. E ≤ 1024, Groups ≤ 256, TopK ≤ 64.
// Results stay on the GPU for the expert dispatch.
func (d *Device) Route(idx, w, logits, bias View, T, E int, r ref.Router) error {
	if err := checkRoute("Route", idx, w, logits, bias, T, E, r); err != nil {
		return err
	}
	k, err := d.kernel("router.wgsl", "main", 4)
	if err != nil {
		return err
	}
	p := params{}.u(E, r.TopK, T, r.Groups, r.TopKGroups, routeFlags(r), b2i(bias.Buf != nil)).f(r.Scale).
		u(logits.Off, bias.Off, idx.Off, w.Off)
	return d.dispatch(k, p, []*Buffer{logits.Buf, bias.Buf, idx.Buf, w.Buf}, T)
}

// checkRoute validates the operands of op's routing (common.wgsl's
// route_token) of T tokens over E experts.
func checkRoute(op string, idx, w, logits, bias View, T, E int, r ref.Router) error {
	if T <= 0 || E <= 0 || E > 1024 || r.TopK <= 0 || r.TopK > E || r.TopK > 64 {
		return fmt.Errorf("wgsl: %s: T %d, E %d, TopK %d (E ≤ 1024, TopK ≤ 64)", op, T, E, r.TopK)
	}
	grouped := r.Groups > 1 && r.Groups > r.TopKGroups
	if grouped && (r.Groups > 256 || E%r.Groups != 0 || r.TopKGroups <= 0) {
		return fmt.Errorf("wgsl: %s: %d groups (top %d) of %d experts", op, r.Groups, r.TopKGroups, E)
	}
	if err := logits.check(T*E, op, "logits"); err != nil {
		return err
	}
	if bias.Buf != nil {
		if err := bias.check(E, op, "bias"); err != nil {
			return err
		}
	}
	if err := idx.check(T*r.TopK, op, "idx"); err != nil {
		return err
	}
	return w.check(T*r.TopK, op, "w")
}

// routeFlags are route_token's flags for r: 1 renormalise, 2 also for
// k = 1, 4 softmax.
func routeFlags(r ref.Router) int {
	return b2i(r.Renormalize) | b2i(r.RenormalizeAnyK)<<1 | b2i(r.Softmax)<<2
}
