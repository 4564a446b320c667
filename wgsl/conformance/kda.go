//go:build cgo || js

package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// kdaCases are the conformance cases of KDARecurrent (kda.wgsl, wgsl/kda.go).
func kdaCases(add adder) {
	for _, s := range [][4]int{{1, 2, 16, 16}, {1, 3, 32, 70}, {5, 2, 64, 65}, {1, 1, 128, 128}, {300, 1, 128, 8}} {
		T, H, dk, dv := s[0], s[1], s[2], s[3]
		add("KDARecurrent", "F32", fmt.Sprintf("T=%d H=%d dk=%d dv=%d", T, H, dk, dv), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			a := KDAInputs(r, T, H, dk, dv, 0.5)
			ga := &wgsl.KDAArgs{T: T, H: H, DK: dk, DV: dv, Q: g.Up(a.Q), K: g.Up(a.K), V: g.Up(a.V), G: g.Up(a.G),
				Beta: g.Up(a.Beta), O: g.Zeros(T * H * dv), S: g.Up(a.S)}
			ref.KDARecurrent(nil, a)
			check(g, g.D.KDARecurrent(ga))
			return append(g.Read(ga.O, T*H*dv), g.Read(ga.S, H*dk*dv)...), append(a.O, a.S...)
		})
	}
}

// KDAInputs draws a KDA problem as a model makes one: Q and K
// L2-normalised (Q also × dk^-1/2), β in [0, 1), log-decays g in
// (−gmax, 0], a random state.
func KDAInputs(r *rand.Rand, T, H, dk, dv int, gmax float32) *ref.KDAArgs {
	a := &ref.KDAArgs{T: T, H: H, DK: dk, DV: dv,
		Q: RandVec(r, T*H*dk, 1), K: RandVec(r, T*H*dk, 1), V: RandVec(r, T*H*dv, 1),
		G: make([]float32, T*H*dk), Beta: make([]float32, T*H), O: make([]float32, T*H*dv), S: RandVec(r, H*dk*dv, 0.5)}
	ref.L2Norm(a.Q, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	ref.L2Norm(a.K, dk, 1e-6, 1)
	for i := range a.G {
		a.G[i] = -r.Float32() * gmax
	}
	for i := range a.Beta {
		a.Beta[i] = r.Float32()
	}
	return a
}
