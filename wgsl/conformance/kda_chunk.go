//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// kdaChunkCases are the conformance cases of KDAChunked (kda_chunk.wgsl,
// kda_chunk_inter.wgsl, wgsl/kda_chunk.go) against ref.KDAChunked with the
// same chunk: one token, T < C, T not a multiple of C, several inter
// dispatches (250 tokens of dk 128), head sizes 64 and 128 and odd ones,
// and strongly negative log-decays (down to −40 a step).
func kdaChunkCases(add adder) {
	for _, s := range []struct {
		T, H, dk, dv, C int
		gmax            float32
	}{
		{1, 2, 64, 64, 32, 0.5}, {5, 3, 64, 64, 32, 0.5}, {45, 2, 64, 64, 16, 0.5}, {64, 8, 64, 64, 32, 0.5},
		{70, 2, 128, 128, 32, 0.5}, {250, 1, 128, 32, 32, 0.5}, {37, 3, 32, 70, 8, 0.5}, {33, 1, 16, 16, 1, 0.5},
		{40, 2, 128, 64, 32, 40}, {96, 2, 64, 64, 32, 8},
	} {
		T, H, dk, dv, C := s.T, s.H, s.dk, s.dv, s.C
		shape := fmt.Sprintf("T=%d H=%d dk=%d dv=%d C=%d gmax=%g", T, H, dk, dv, C, s.gmax)
		add("KDAChunked", "F32", shape, 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			a := KDAInputs(r, T, H, dk, dv, s.gmax)
			ga := &wgsl.KDAArgs{T: T, H: H, DK: dk, DV: dv, Q: g.Up(a.Q), K: g.Up(a.K), V: g.Up(a.V), G: g.Up(a.G),
				Beta: g.Up(a.Beta), O: g.Zeros(T * H * dv), S: g.Up(a.S)}
			ref.KDAChunked(nil, a, C)
			check(g, g.D.KDAChunked(ga, C))
			return append(g.Read(ga.O, T*H*dv), g.Read(ga.S, H*dk*dv)...), append(a.O, a.S...)
		})
	}
}
