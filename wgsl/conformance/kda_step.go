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

// kdaStepCases are the conformance cases of KDAStep (kda_step.wgsl,
// wgsl/kda_step.go): a decoded token's KDAPrep with its gate, then the
// delta rule, against ref.ShortConv, L2Norm, Sigmoid, Linear, KDAGate and
// KDARecurrent. Every weight format of f_b, each with one of the shapes
// below in turn: heads of 1 to 256 values (one pass of the 64-thread
// workgroup or several), conv kernels 2 to 5, per-head and per-channel
// A_log, bounded and softplus gates. The state and the tails share one
// buffer (as the runner's), with gaps between the tails.
func kdaStepCases(add adder) {
	shapes := []struct {
		H, dk, K       int
		perCh, bounded bool
	}{{2, 64, 4, false, true}, {3, 16, 2, true, false}, {1, 130, 3, false, false}, {2, 256, 5, true, true}, {4, 1, 4, false, true}}
	for i, dt := range slices.Concat(dtypes, blockDTypes) {
		s := shapes[i%len(shapes)]
		H, dk, K := s.H, s.dk, s.K
		cols := 64
		if dt == tensor.Q4K || dt == tensor.Q5K || dt == tensor.Q6K {
			cols = 256
		}
		add("KDAStep", dt.String(), fmt.Sprintf("H=%d dk=%d K=%d cols=%d perChannel=%v bounded=%v", H, dk, K, cols, s.perCh, s.bounded), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			C := H * dk
			tails := (K-1)*C + 3
			x := RandVec(r, 3*C+H+cols, 1) // [q k v], β, then f_a's output
			w := RandVec(r, 3*C*K, 1)
			state := RandVec(r, H*dk*dk+3*tails, 0.5) // S, then the tails
			W := RandMat(r, C, cols, dt, 0.3)
			nA := H
			if s.perCh {
				nA = C
			}
			bias, alog := RandVec(r, C, 1), RandVec(r, nA, 1)
			xv, sv, e := g.Up(x), g.Up(state), g.Up(slices.Concat(bias, alog))
			a := &wgsl.KDAStepArgs{H: H, DK: dk, K: K, TailStep: tails, QScale: float32(1 / math.Sqrt(float64(dk))), Eps: 1e-6,
				X: xv, Beta: xv.Buf.At(xv.Off + 3*C), Conv: g.Up(w), Tails: sv.Buf.At(sv.Off + H*dk*dk), S: sv, O: g.Zeros(C),
				Gate: wgsl.KDAPrepGate{G: g.Zeros(C), FA: xv.Buf.At(xv.Off + 3*C + H), W: g.Mat(W),
					E: wgsl.KDAGateEpilogue{H: H, DK: dk, DtBias: e, ALog: e.Buf.At(e.Off + C), PerChannel: s.perCh, Bounded: s.bounded, LowerBound: -5}}}
			check(g, g.D.KDAStep(a))

			want := slices.Clone(state)
			ra := &ref.KDAArgs{T: 1, H: H, DK: dk, DV: dk, Q: make([]float32, C), K: make([]float32, C), V: make([]float32, C),
				G: make([]float32, C), Beta: make([]float32, H), O: make([]float32, C), S: want[:H*dk*dk]}
			for j, o := range [][]float32{ra.Q, ra.K, ra.V} {
				t := H*dk*dk + j*tails
				ref.ShortConv(o, x[j*C:(j+1)*C], w[j*C*K:(j+1)*C*K], want[t:t+(K-1)*C], 1, C, K)
			}
			ref.L2Norm(ra.Q, dk, 1e-6, a.QScale)
			ref.L2Norm(ra.K, dk, 1e-6, 1)
			for h := range H {
				ra.Beta[h] = ref.Sigmoid(x[3*C+h])
			}
			raw := make([]float32, C)
			ref.Linear(nil, raw, x[3*C+H:], 1, oracle(W))
			ref.KDAGate(ra.G, raw, bias, alog, H, dk, s.bounded, -5)
			ref.KDARecurrent(nil, ra)
			return append(g.Read(a.O, C), g.Read(sv, len(state))...), append(ra.O, want...)
		})
	}
}
