//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
)

// convCases are the conformance cases of ShortConv (conv.wgsl, wgsl/conv.go).
func convCases(add adder) {
	// ShortConv in pieces (state carried across calls and pieces shorter
	// than the history), compared with the reference in the same pieces.
	for _, s := range [][]int{{5, 4, 1}, {70, 4, 3, 1, 5}, {64, 2, 10}, {130, 4, 2, 2, 7}, {33, 4, 1, 1, 1}} {
		C, K, pieces := s[0], s[1], s[2:]
		add("ShortConv", "F32", fmt.Sprintf("C=%d K=%d pieces=%v", C, K, pieces), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			w := RandVec(r, C*K, 1)
			state := RandVec(r, (K-1)*C, 1)
			wv, sv := g.Up(w), g.Up(state)
			var got, want []float32
			for _, T := range pieces {
				x := RandVec(r, T*C, 2)
				o := make([]float32, T*C)
				ref.ShortConv(o, x, w, state, T, C, K)
				ov := g.Zeros(T * C)
				check(g, g.D.ShortConv(ov, g.Up(x), wv, sv, T, C, K))
				want = append(want, o...)
				got = append(got, g.Read(ov, T*C)...)
			}
			return append(got, g.Read(sv, (K-1)*C)...), append(want, state...)
		})
	}
}
