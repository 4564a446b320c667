//go:build cgo || js

package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
)

// normCases are the conformance cases of RMSNorm, L2Norm and strided RMSNorm rows (norm.wgsl, wgsl/norm.go).
func normCases(add adder) {
	norms := [][2]int{{1, 1}, {3, 64}, {2, 65}, {4, 257}, {1, 4096}}
	for _, s := range norms {
		rows, n := s[0], s[1]
		shape := fmt.Sprintf("%dx%d", rows, n)
		add("RMSNorm", "F32", shape, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, w := RandVec(r, rows*n, 3), RandVec(r, n, 1)
			want := make([]float32, rows*n)
			ref.RMSNorm(want, x, w, 1e-6)
			xv := g.Up(x)
			check(g, g.D.RMSNorm(xv, xv, g.Up(w), rows, n, 1e-6)) // in place
			return g.Read(xv, rows*n), want
		})
		for _, act := range []ref.GateAct{ref.GateSigmoid, ref.GateSiLU} {
			name := map[ref.GateAct]string{ref.GateSigmoid: "RMSNormGated/sigmoid", ref.GateSiLU: "RMSNormGated/SiLU"}[act]
			add(name, "F32", shape, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				x, gt, w := RandVec(r, rows*n, 3), RandVec(r, rows*n, 4), RandVec(r, n, 1)
				want := make([]float32, rows*n)
				ref.RMSNormGated(want, x, gt, w, 1e-5, act)
				out := g.Zeros(rows * n)
				check(g, g.D.RMSNormGated(out, g.Up(x), g.Up(gt), g.Up(w), rows, n, 1e-5, act))
				return g.Read(out, rows*n), want
			})
		}
		add("L2Norm", "F32", shape, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x := RandVec(r, rows*n, 2)
			xv := g.Up(x)
			scale := float32(1 / math.Sqrt(float64(n)))
			ref.L2Norm(x, n, 1e-6, scale)
			check(g, g.D.L2Norm(xv, xv, rows, n, 1e-6, scale))
			return g.Read(xv, rows*n), x
		})
	}
	for _, s := range [][3]int{{1, 32, 40}, {5, 32, 40}, {3, 257, 300}} {
		rows, n, stride := s[0], s[1], s[2]
		add("RMSNormRows", "F32", fmt.Sprintf("%dx%d stride %d", rows, n, stride), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, w := RandVec(r, rows*stride, 3), RandVec(r, n, 1)
			xv := g.Up(x)
			for i := 0; i < rows; i++ {
				row := x[i*stride : i*stride+n]
				ref.RMSNorm(row, row, w, 1e-5)
			}
			check(g, g.D.RMSNormRows(xv.Rows(stride), xv.Rows(stride), g.Up(w), rows, n, 1e-5)) // in place
			return g.Read(xv, rows*stride), x
		})
	}
}
