//go:build cgo || js

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/ref"
)

// Op wrappers of router.wgsl.

// Route records the MoE router (ref.Router.Route: sigmoid or softmax
// scores) for T tokens:
// logits [T, E], bias [E] (a zero View for none), idx [T, TopK] as u32
// expert ids, w [T, TopK] weights. E ≤ 1024, Groups ≤ 256. Results stay on
// the GPU for the expert dispatch.
func (d *Device) Route(idx, w, logits, bias View, T, E int, r ref.Router) error {
	if T <= 0 || E <= 0 || E > 1024 || r.TopK <= 0 || r.TopK > E {
		return fmt.Errorf("wgsl: Route: T %d, E %d, TopK %d (E ≤ 1024)", T, E, r.TopK)
	}
	grouped := r.Groups > 1 && r.Groups > r.TopKGroups
	if grouped && (r.Groups > 256 || E%r.Groups != 0 || r.TopKGroups <= 0) {
		return fmt.Errorf("wgsl: Route: %d groups (top %d) of %d experts", r.Groups, r.TopKGroups, E)
	}
	if err := logits.check(T*E, "Route logits"); err != nil {
		return err
	}
	hasBias := bias.Buf != nil
	if hasBias {
		if err := bias.check(E, "Route bias"); err != nil {
			return err
		}
	}
	if err := idx.check(T*r.TopK, "Route idx"); err != nil {
		return err
	}
	if err := w.check(T*r.TopK, "Route w"); err != nil {
		return err
	}
	k, err := d.kernel("router.wgsl", "main", 4)
	if err != nil {
		return err
	}
	flags := b2i(r.Renormalize) | b2i(r.RenormalizeAnyK)<<1 | b2i(r.Softmax)<<2
	p := params{}.u(E, r.TopK, T, r.Groups, r.TopKGroups, flags, b2i(hasBias)).f(r.Scale).
		u(logits.Off, bias.Off, idx.Off, w.Off)
	return d.dispatch(k, p, []*Buffer{logits.Buf, bias.Buf, idx.Buf, w.Buf}, T)
}
