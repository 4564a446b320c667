//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/wgsl"
)

// sampleCases are the conformance cases of Sample (sample.wgsl, wgsl/sample.go).
func sampleCases(add adder) {
	// Sample: the GPU sampler against generate.Sampler.SampleDraw with the
	// same draws. Vocabularies straddle the 256-wide workgroup; ties sit at
	// the top-k cut and at the top of the order; settings cover each stage.
	sampleOpts := []generate.SamplerOptions{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 1},
		{Temperature: 1, TopK: 5},
		{Temperature: 1.3, TopK: 40, TopP: 0.9},
		{Temperature: 1, TopP: 0.5},
		{Temperature: 0.8, MinP: 0.05},
		{Temperature: 1, TopK: 3, TopP: 0.95, MinP: 0.01},
	}
	for _, n := range []int{1, 7, 256, 257, 5000} {
		for _, o := range sampleOpts {
			shape := fmt.Sprintf("%d T=%g k=%d p=%g min-p=%g", n, o.Temperature, o.TopK, o.TopP, o.MinP)
			add("Sample", "F32", shape, 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				x := RandVec(r, n, 4)
				if n > 8 {
					x[n-1], x[n/2], x[3] = 5, 5, 5 // ties at the top of the order
					x[1], x[n-3] = 4.5, 4.5
				}
				xv, wv, out := g.Up(x), g.Zeros(n), g.Zeros(1)
				smp := generate.NewSampler(o, n)
				const draws = 6
				got, want := make([]float32, draws), make([]float32, draws)
				id := make([]uint32, 1)
				for i := range draws {
					u := (float64(i) + r.Float64()) / draws
					check(g, g.D.Sample(out, xv, wv, n, wgsl.SampleParams{Temperature: o.Temperature, TopK: o.TopK, TopP: o.TopP, MinP: o.MinP, U: u}))
					check(g, g.D.ReadU32(out, id))
					c := smp.SampleDraw(slices.Clone(x), u)
					got[i], want[i] = float32(id[0]), float32(c)
					// f32 sums on the GPU, f64 on the host: a draw within
					// 1e-5 of the boundary between two tokens may pick
					// the neighbour, which a nudged draw must then give.
					if int(id[0]) != c && (smp.SampleDraw(slices.Clone(x), max(0, u-1e-5)) == int(id[0]) ||
						smp.SampleDraw(slices.Clone(x), min(u+1e-5, 1-1e-12)) == int(id[0])) {
						want[i] = got[i]
					}
				}
				return got, want
			})
		}
	}
}
