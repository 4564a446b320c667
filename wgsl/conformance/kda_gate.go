//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
)

// kdaGateCases are the conformance cases of KDAGate (kda_gate.wgsl, wgsl/kda_gate.go).
func kdaGateCases(add adder) {
	for _, gc := range []struct {
		name       string
		bounded    bool
		perChannel bool
	}{{"KDAGate/bounded", true, false}, {"KDAGate/softplus", false, false}, {"KDAGate/softplus-per-channel", false, true}} {
		for _, s := range [][3]int{{1, 2, 16}, {3, 3, 100}} {
			T, H, dk := s[0], s[1], s[2]
			add(gc.name, "F32", fmt.Sprintf("T=%d H=%d dk=%d", T, H, dk), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				raw, bias := RandVec(r, T*H*dk, 30), RandVec(r, H*dk, 1)
				na := H
				if gc.perChannel {
					na = H * dk
				}
				alog := RandVec(r, na, 1.5)
				want := make([]float32, len(raw))
				ref.KDAGate(want, raw, bias, alog, H, dk, gc.bounded, -5)
				rv := g.Up(raw)
				check(g, g.D.KDAGate(rv, rv, g.Up(bias), g.Up(alog), T, H, dk, gc.perChannel, gc.bounded, -5))
				return g.Read(rv, len(raw)), want
			})
		}
	}
}
