//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/generate"
)

// argmaxCases are the conformance cases of Argmax (argmax.wgsl, wgsl/argmax.go).
func argmaxCases(add adder) {
	for _, n := range []int{1, 255, 257, 5000, 70000} {
		add("Argmax", "F32", fmt.Sprint(n), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x := RandVec(r, n, 5)
			if n > 3 {
				x[n-1] = 9 // a tie: the first index must win
				x[n/2] = 9
			}
			out := g.Zeros(1)
			check(g, g.D.Argmax(out, g.Up(x), n))
			id := make([]uint32, 1)
			check(g, g.D.ReadU32(out, id))
			return []float32{float32(id[0])}, []float32{float32(generate.Argmax(x))}
		})
	}
}
