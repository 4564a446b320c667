//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// elementwiseCases are the conformance cases of GLU, Add, Axpy, Sigmoid and SigmoidGate (elementwise.wgsl, wgsl/elementwise.go).
func elementwiseCases(add adder) {
	// GLU on the two halves of a fused [rows, 2n] projection (strided rows).
	for _, act := range []struct {
		name string
		a    ref.Act
	}{{"GLU/SiLU", ref.Act{}}, {"GLU/SiTU", ref.Act{SiTU: true, Beta: 4, BetaLin: 25}}, {"GLU/SiTU-uncapped", ref.Act{SiTU: true, Beta: 4}}} {
		for _, s := range [][2]int{{1, 1}, {3, 300}, {2, 1000}, {1, 70000}} {
			rows, n := s[0], s[1]
			add(act.name, "F32", fmt.Sprintf("%dx%d", rows, n), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				gu := RandVec(r, rows*2*n, 40) // large enough to exercise the tanh caps
				want := make([]float32, rows*n)
				for i := 0; i < rows; i++ {
					act.a.GLU(want[i*n:(i+1)*n], gu[i*2*n:i*2*n+n], gu[i*2*n+n:(i+1)*2*n])
				}
				v := g.Up(gu)
				out := g.Zeros(rows * n)
				check(g, g.D.GLU(out.Rows(n), v.Rows(2*n), wgsl.View{Buf: v.Buf, Off: n}.Rows(2*n), rows, n, act.a))
				return g.Read(out, rows*n), want
			})
		}
	}
	for _, n := range []int{1, 255, 257, 5000} {
		add("Add", "F32", fmt.Sprint(n), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, y := RandVec(r, n, 1), RandVec(r, n, 1)
			want := append([]float32(nil), x...)
			ref.Axpy(1, y, want)
			xv := g.Up(x)
			check(g, g.D.Add(xv, xv, g.Up(y), n, 1))
			return g.Read(xv, n), want
		})
		add("Axpy", "F32", fmt.Sprint(n), 1e-14, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, y := RandVec(r, n, 1), RandVec(r, n, 1)
			yv := g.Up(y)
			ref.Axpy(-0.7, x, y)
			check(g, g.D.Axpy(-0.7, g.Up(x), yv, n))
			return g.Read(yv, n), y
		})
	}
	for _, n := range []int{1, 300, 4097} {
		add("SigmoidGate", "F32", fmt.Sprint(n), 1e-12, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			o, gt := RandVec(r, n, 2), RandVec(r, n, 6)
			ov := g.Up(o)
			for i := range o {
				o[i] *= ref.Sigmoid(gt[i])
			}
			check(g, g.D.SigmoidGate(ov.Rows(n), g.Up(gt).Rows(n), ov.Rows(n), 1, n))
			return g.Read(ov, n), o
		})
		add("Sigmoid", "F32", fmt.Sprint(n), 1e-12, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x := RandVec(r, n, 6)
			xv := g.Up(x)
			for i := range x {
				x[i] = ref.Sigmoid(x[i])
			}
			check(g, g.D.Sigmoid(xv.Rows(n), xv.Rows(n), 1, n))
			return g.Read(xv, n), x
		})
	}
}
