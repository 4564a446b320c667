//go:build cgo || js

package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
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
			check(g, g.D.KDAPrep(ov, step, xv, xv.Buf.At(xv.Off+3*C), g.Up(w), sv, tails, H, dk, K, qScale, 1e-6, nil))
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
	// KDAPrep with the step's gate in the same dispatch (LinearKDAGate's
	// rows after the conv's workgroups): the gate against ref.Linear then
	// ref.KDAGate, for plain and block-format f_b, per-head and
	// per-channel A_log, bounded and softplus gates; the conv outputs as
	// above.
	for _, c := range []struct {
		dt             tensor.DType
		H, dk, cols    int
		perCh, bounded bool
	}{{tensor.F32, 2, 16, 16, false, true}, {tensor.F16, 3, 64, 64, true, false}, {tensor.Q8_0, 2, 64, 64, false, true},
		{tensor.Q4K, 2, 128, 256, true, true}} {
		H, dk, K := c.H, c.dk, 4
		add("KDAPrep/gate", c.dt.String(), fmt.Sprintf("H=%d dk=%d cols=%d perChannel=%v bounded=%v", H, dk, c.cols, c.perCh, c.bounded), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			C := H * dk
			tails := (K - 1) * C
			x := RandVec(r, 3*C+H+c.cols, 1) // [q k v], β, then f_a's output
			w := RandVec(r, 3*C*K, 1)
			state := RandVec(r, 3*tails, 1)
			W := RandMat(r, C, c.cols, c.dt, 0.3)
			nA := H
			if c.perCh {
				nA = C
			}
			bias, alog := RandVec(r, C, 1), RandVec(r, nA, 1)
			xv, sv, ov, gv := g.Up(x), g.Up(state), g.Zeros(3*C), g.Zeros(C)
			e := g.Up(slices.Concat(bias, alog))
			gate := &wgsl.KDAPrepGate{G: gv, FA: xv.Buf.At(xv.Off + 3*C + H), W: g.Mat(W),
				E: wgsl.KDAGateEpilogue{H: H, DK: dk, DtBias: e, ALog: e.Buf.At(e.Off + C), PerChannel: c.perCh, Bounded: c.bounded, LowerBound: -5}}
			qScale := float32(1 / math.Sqrt(float64(dk)))
			check(g, g.D.KDAPrep(ov, C, xv, xv.Buf.At(xv.Off+3*C), g.Up(w), sv, tails, H, dk, K, qScale, 1e-6, gate))
			raw := make([]float32, C)
			ref.Linear(nil, raw, x[3*C+H:], 1, oracle(W))
			want := make([]float32, C)
			ref.KDAGate(want, raw, bias, alog, H, dk, c.bounded, -5)
			q := make([]float32, C)
			ref.ShortConv(q, x[:C], w[:C*K], slices.Clone(state[:tails]), 1, C, K)
			ref.L2Norm(q, dk, 1e-6, qScale)
			return append(g.Read(gv, C), g.Read(ov, C)...), append(want, q...)
		})
	}
}
