//go:build cgo || js

package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/ref"
)

// kdaPrepCases are the conformance cases of KDAPrep (kda_prep.wgsl, wgsl/kda_prep.go).
func kdaPrepCases(add adder) {
	// KDAPrep: the fused decode-step form of ShortConv ×3, L2Norm ×2 and
	// Sigmoid; head sizes straddle the 128-thread workgroup, conv kernels
	// from 2 (one tail row) up.
	for _, s := range [][3]int{{1, 1, 2}, {2, 64, 4}, {3, 130, 3}, {2, 257, 4}} {
		H, dk, K := s[0], s[1], s[2]
		add("KDAPrep", "F32", fmt.Sprintf("H=%d dk=%d K=%d", H, dk, K), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			C := H * dk
			tails, step := (K-1)*C+3, C+5 // gaps between the tails and outputs
			x := RandVec(r, 3*C+H+2, 2)   // [q k v], then β (and 2 spare words)
			w := RandVec(r, 3*C*K, 1)
			state := RandVec(r, 2*tails+(K-1)*C, 1)
			xv, sv, ov := g.Up(x), g.Up(state), g.Zeros(2*step+C)
			qScale := float32(1 / math.Sqrt(float64(dk)))
			check(g, g.D.KDAPrep(ov, step, xv, xv.Buf.At(xv.Off+3*C), g.Up(w), sv, tails, H, dk, K, qScale, 1e-6))
			var want []float32
			wantState := slices.Clone(state)
			for j := range 3 {
				o := make([]float32, C)
				ref.ShortConv(o, x[j*C:(j+1)*C], w[j*C*K:(j+1)*C*K], wantState[j*tails:j*tails+(K-1)*C], 1, C, K)
				switch j {
				case 0:
					ref.L2Norm(o, dk, 1e-6, qScale)
				case 1:
					ref.L2Norm(o, dk, 1e-6, 1)
				}
				want = append(want, o...)
			}
			for h := range H {
				want = append(want, ref.Sigmoid(x[3*C+h]))
			}
			all := g.Read(ov, 2*step+C)
			got := append(append(append([]float32{}, all[:C]...), all[step:step+C]...), all[2*step:2*step+C]...)
			got = append(got, g.Read(xv, 3*C+H)[3*C:]...)
			return append(got, g.Read(sv, len(state))...), append(want, wantState...)
		})
	}
}
