//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// routerCases are the conformance cases of Route (router.wgsl, wgsl/router.go).
func routerCases(add adder) {
	for _, rc := range []struct {
		E, T int
		r    ref.Router
		bias bool
	}{
		{16, 1, ref.Router{TopK: 4, Scale: 1}, false},
		{64, 3, ref.Router{TopK: 6, Groups: 8, TopKGroups: 3, Renormalize: true, Scale: 2.5}, true},
		{896, 2, ref.Router{TopK: 16, Renormalize: true, Scale: 2.827}, true},
		{256, 2, ref.Router{TopK: 8, Groups: 8, TopKGroups: 4, Renormalize: true, Scale: 2.5}, true},
		// Qwen3-Next's softmax router; DeepSeek-V3's renormalisation of one expert
		{8, 3, ref.Router{TopK: 2, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}, false},
		{512, 2, ref.Router{TopK: 10, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}, false},
		{16, 2, ref.Router{TopK: 1, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}, false},
		{16, 2, ref.Router{TopK: 3, Softmax: true, Scale: 1}, false},
		{32, 2, ref.Router{TopK: 1, Groups: 4, TopKGroups: 2, Renormalize: true, RenormalizeAnyK: true, Scale: 2.5}, true},
	} {
		shape := fmt.Sprintf("E=%d k=%d groups=%d/%d", rc.E, rc.r.TopK, rc.r.TopKGroups, rc.r.Groups)
		if rc.r.Softmax {
			shape += " softmax"
		}
		if rc.r.RenormalizeAnyK {
			shape += " renorm-any-k"
		}
		add("Router", "F32", shape, 1e-11,
			func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				k := rc.r.TopK
				logits := RandVec(r, rc.T*rc.E, 4)
				var bias []float32
				bv := wgsl.View{}
				if rc.bias {
					bias = RandVec(r, rc.E, 0.3)
					bv = g.Up(bias)
				}
				idx, w := g.Zeros(rc.T*k), g.Zeros(rc.T*k)
				check(g, g.D.Route(idx, w, g.Up(logits), bv, rc.T, rc.E, rc.r))
				gotIdx := make([]uint32, rc.T*k)
				check(g, g.D.ReadU32(idx, gotIdx))
				gotW := g.Read(w, rc.T*k)
				var got, want []float32
				for t := 0; t < rc.T; t++ {
					wi, ww := make([]int, k), make([]float32, k)
					rc.r.Route(wi, ww, logits[t*rc.E:(t+1)*rc.E], bias, make([]float32, 2*rc.E))
					for j := range wi {
						if int(gotIdx[t*k+j]) != wi[j] {
							g.t.Errorf("token %d slot %d: expert %d, want %d", t, j, gotIdx[t*k+j], wi[j])
						}
					}
					got, want = append(got, gotW[t*k:(t+1)*k]...), append(want, ww...)
				}
				return got, want
			})
	}
}
