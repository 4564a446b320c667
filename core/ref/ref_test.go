package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(r.NormFloat64()) * scale
	}
	return v
}

// maxRelErr is max|a−b| / max(max|b|, tiny).
func maxRelErr(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		num = math.Max(num, math.Abs(float64(a[i]-b[i])))
		den = math.Max(den, math.Abs(float64(b[i])))
	}
	return num / math.Max(den, 1e-30)
}

func TestLinearMatchesNaive(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := NewPool(3)
	defer p.Close()
	for _, sh := range [][3]int{{1, 1, 1}, {1, 7, 5}, {3, 64, 33}, {17, 130, 9}} {
		T, in, out := sh[0], sh[1], sh[2]
		w := randVec(r, in*out, 1)
		x := randVec(r, T*in, 1)
		want := make([]float32, T*out)
		for tt := 0; tt < T; tt++ {
			for o := 0; o < out; o++ {
				var s float64
				for i := 0; i < in; i++ {
					s += float64(x[tt*in+i]) * float64(w[o*in+i])
				}
				want[tt*out+o] = float32(s)
			}
		}
		got := make([]float32, T*out)
		Linear(p, got, x, T, tensor.NewF32(out, in, w))
		require.Less(t, maxRelErr(got, want), 1e-5, "shape %v", sh)
	}
}

// TestShortConvPiecesEqualOneShot: pieces of any size give one call's
// values, and so does ShortConvRows with the tokens split over workers.
func TestShortConvPiecesEqualOneShot(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const T, C, K = 61, 96, 4 // ShortConvRows splits pieces of 43 tokens and more
	x := randVec(r, T*C, 1)
	w := randVec(r, C*K, 0.5)
	oneShot := make([]float32, T*C)
	ShortConv(oneShot, x, w, make([]float32, (K-1)*C), T, C, K)
	// Hand check of token 0, channel 0: only the current tap sees data.
	require.InDelta(t, SiLU(w[K-1]*x[0]), oneShot[0], 1e-6)
	p := NewPool(3)
	defer p.Close()
	for _, pieces := range [][]int{{1}, {2, 1, 5}, {7}, {3, 20}, {61}, {50, 11}} {
		for _, pool := range []*Pool{nil, p} {
			state := make([]float32, (K-1)*C)
			got := make([]float32, T*C)
			t0, pi := 0, 0
			for t0 < T {
				n := min(pieces[pi%len(pieces)], T-t0)
				if pool == nil {
					ShortConv(got[t0*C:], x[t0*C:(t0+n)*C], w, state, n, C, K)
				} else {
					ShortConvRows(pool, got[t0*C:], x[t0*C:(t0+n)*C], w, state, n, C, K)
				}
				t0 += n
				pi++
			}
			require.Equal(t, oneShot, got, "pieces %v, pool %v", pieces, pool != nil)
		}
	}
}

// kdaInputs builds random, properly normalised KDA inputs.
func kdaInputs(r *rand.Rand, T, H, dk, dv int, bounded bool) *KDAArgs {
	a := &KDAArgs{T: T, H: H, DK: dk, DV: dv}
	a.Q = randVec(r, T*H*dk, 1)
	a.K = randVec(r, T*H*dk, 1)
	a.V = randVec(r, T*H*dv, 1)
	L2Norm(a.Q, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	L2Norm(a.K, dk, 1e-6, 1)
	raw := randVec(r, T*H*dk, 1)
	a.G = make([]float32, T*H*dk)
	aLog := make([]float32, H)
	for i := range aLog {
		aLog[i] = float32(math.Log(1 + 15*r.Float64()))
	}
	KDAGate(a.G, raw, randVec(r, H*dk, 0.1), aLog, H, dk, bounded, -5)
	a.Beta = make([]float32, T*H)
	for i := range a.Beta {
		a.Beta[i] = Sigmoid(float32(r.NormFloat64()))
	}
	a.O = make([]float32, T*H*dv)
	a.S = make([]float32, H*dk*dv)
	return a
}

func TestKDAChunkedEqualsRecurrent(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	const H, dk, dv = 2, 8, 6
	for _, bounded := range []bool{true, false} {
		for _, T := range []int{1, 3, 12, 13, 64, 65, 200} {
			for _, C := range []int{4, 16, 64} {
				for _, init := range []bool{false, true} {
					name := fmt.Sprintf("bounded=%v/T=%d/C=%d/init=%v", bounded, T, C, init)
					r := rand.New(rand.NewPCG(uint64(T), uint64(C)))
					a := kdaInputs(r, T, H, dk, dv, bounded)
					if init {
						a.S = randVec(r, H*dk*dv, 0.5)
					}
					b := *a
					b.S = append([]float32(nil), a.S...)
					b.O = make([]float32, len(a.O))
					KDARecurrent(p, a)
					KDAChunked(p, &b, C)
					require.Less(t, maxRelErr(b.O, a.O), 2e-5, name+" outputs")
					require.Less(t, maxRelErr(b.S, a.S), 2e-5, name+" state")
				}
			}
		}
	}
}

func TestKDASplitPrefillEqualsOneShot(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	const T, H, dk, dv = 70, 2, 8, 8
	a := kdaInputs(r, T, H, dk, dv, true)
	KDAChunked(nil, a, 16)
	S := make([]float32, H*dk*dv)
	O := make([]float32, T*H*dv)
	for _, piece := range [][2]int{{0, 7}, {7, 13}, {13, 64}, {64, 65}, {65, 70}} {
		lo, hi := piece[0], piece[1]
		b := KDAArgs{T: hi - lo, H: H, DK: dk, DV: dv,
			Q: a.Q[lo*H*dk:], K: a.K[lo*H*dk:], V: a.V[lo*H*dv:], G: a.G[lo*H*dk:],
			Beta: a.Beta[lo*H:], O: O[lo*H*dv:], S: S}
		KDAChunked(nil, &b, 16)
	}
	require.Less(t, maxRelErr(O, a.O), 2e-5)
	require.Less(t, maxRelErr(S, a.S), 2e-5)
}

func TestKDARecurrentHandCase(t *testing.T) {
	// One head, dk = dv = 1: S' = e^g S; u = β(v − kS'); S'' = S' + k u; o = q S''.
	a := &KDAArgs{T: 1, H: 1, DK: 1, DV: 1, Q: []float32{0.5}, K: []float32{1},
		V: []float32{2}, G: []float32{float32(math.Log(0.5))}, Beta: []float32{0.25},
		O: []float32{0}, S: []float32{4}}
	KDARecurrent(nil, a)
	// S' = 2, u = 0.25·(2−2) = 0, S'' = 2, o = 1.
	require.InDelta(t, 2.0, a.S[0], 1e-6)
	require.InDelta(t, 1.0, a.O[0], 1e-6)
}

func TestKDAGateVariants(t *testing.T) {
	g := make([]float32, 2)
	KDAGate(g, []float32{0, 1}, []float32{0, 0}, []float32{0}, 1, 2, true, -5)
	require.InDelta(t, -2.5, g[0], 1e-6) // lb·σ(0)
	KDAGate(g, []float32{0, 1}, []float32{0, 0}, []float32{0}, 1, 2, false, 0)
	require.InDelta(t, -math.Log(2), g[0], 1e-6) // −softplus(0)
	require.InDelta(t, -math.Log1p(math.E), g[1], 1e-6)
}

func mlaCase(r *rand.Rand, N, pos0 int, half bool) *MLAArgs {
	a := &MLAArgs{N: N, H: 3, DN: 8, DR: 4, DV: 5, RKV: 12, Pos0: pos0}
	a.Scale = float32(1 / math.Sqrt(float64(a.DN+a.DR)))
	a.Q = randVec(r, N*a.H*(a.DN+a.DR), 1)
	w := randVec(r, a.H*(a.DN+a.DV)*a.RKV, 0.3)
	a.WKVB = tensor.NewF32(a.H*(a.DN+a.DV), a.RKV, w)
	a.Cache = NewLatentCache(a.RKV+a.DR, 5)
	a.Cache.Append(randVec(r, (pos0+N)*(a.RKV+a.DR), 1))
	a.O = make([]float32, N*a.H*a.DV)
	return a
}

func TestMLANaiveEqualsAbsorbed(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	for _, c := range [][2]int{{1, 0}, {1, 9}, {7, 0}, {6, 300}, {130, 2}} {
		r := rand.New(rand.NewPCG(uint64(c[0]), uint64(c[1])))
		a := mlaCase(r, c[0], c[1], false)
		b := *a
		b.O = make([]float32, len(a.O))
		var s MLAScratch
		MLANaive(p, a, &s)
		MLAAbsorbed(p, &b, &s)
		require.Less(t, maxRelErr(b.O, a.O), 1e-5, "case %v", c)
	}
}

func TestMLASingleKeyReturnsValue(t *testing.T) {
	// With one visible key the softmax is 1 and o_h = W_UV_h c_kv(0).
	r := rand.New(rand.NewPCG(5, 5))
	a := mlaCase(r, 1, 0, false)
	MLAAbsorbed(nil, a, &MLAScratch{})
	c := a.Cache.Row(0)[:a.RKV]
	for h := 0; h < a.H; h++ {
		for j := 0; j < a.DV; j++ {
			want := Dot(a.WKVB.F32[(h*(a.DN+a.DV)+a.DN+j)*a.RKV:][:a.RKV], c)
			require.InDelta(t, want, a.O[h*a.DV+j], 1e-5)
		}
	}
}

func TestLatentCacheGrowsInPages(t *testing.T) {
	c := NewLatentCache(2, 4)
	for i := 0; i < 9; i++ {
		c.Append([]float32{float32(i), float32(-i)})
	}
	first := &c.Row(0)[0]
	c.Append(make([]float32, 2*10))
	require.Same(t, first, &c.Row(0)[0], "appending must not move cached rows")
	require.Equal(t, 19, c.Len())
	require.Equal(t, []float32{8, -8}, c.Row(8))
	d := c.Clone()
	d.Row(0)[0] = 42
	require.Equal(t, float32(0), c.Row(0)[0])
}

func TestRouterHandCases(t *testing.T) {
	logit := func(s float64) float32 { return float32(math.Log(s / (1 - s))) } // σ⁻¹
	scratch := make([]float32, 16)
	idx, w := make([]int, 2), make([]float32, 2)

	// Bias changes the selection but not the weights.
	r := Router{TopK: 2, Renormalize: true, Scale: 2}
	logits := []float32{logit(0.9), logit(0.8), logit(0.3), logit(0.2)}
	r.Route(idx, w, logits, []float32{0, -1, 0, 0.65}, scratch)
	require.Equal(t, []int{0, 3}, idx) // s_sel = 0.9, −0.2, 0.3, 0.85: expert 1 loses to 3
	require.InDelta(t, 2*0.9/1.1, w[0], 1e-6)
	require.InDelta(t, 2*0.2/1.1, w[1], 1e-6)

	// Group-limited: 8 experts, 4 groups of 2, keep the best 2 groups by the
	// sum of their two best scores. Group sums: g0 0.5+0.1, g1 0.4+0.4,
	// g2 0.95+0.0, g3 0.3+0.3 → keep g1 (0.8) and g2 (0.95); expert 0
	// (0.5, in dropped group 0) must lose to expert 2 (0.4).
	r = Router{TopK: 2, Groups: 4, TopKGroups: 2, Scale: 1}
	s := []float64{0.5, 0.1, 0.4, 0.4, 0.95, 1e-6, 0.3, 0.3}
	logits = make([]float32, len(s))
	for i, v := range s {
		logits[i] = logit(v)
	}
	r.Route(idx, w, logits, nil, scratch)
	require.Equal(t, []int{4, 2}, idx)
	require.InDelta(t, 0.95, w[0], 1e-6)
	require.InDelta(t, 0.4, w[1], 1e-6)
}

func TestAttnResZeroQueryIsMean(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	d := 6
	srcs := [][]float32{randVec(r, d, 1), randVec(r, d, 1), randVec(r, d, 1)}
	out := make([]float32, d)
	AttnRes(out, srcs, make([]float32, d), randVec(r, d, 1), 1e-5, make([]float32, 3))
	for i := 0; i < d; i++ {
		require.InDelta(t, (srcs[0][i]+srcs[1][i]+srcs[2][i])/3, out[i], 1e-6)
	}
	// A large query aligned with source 1's normalised direction selects it.
	w := make([]float32, d)
	inv := rmsInv(srcs[1], 1e-5)
	for i := range w {
		w[i] = 100 * srcs[1][i] * inv
	}
	ones := make([]float32, d)
	for i := range ones {
		ones[i] = 1
	}
	AttnRes(out, srcs, w, ones, 1e-5, make([]float32, 3))
	require.Less(t, maxRelErr(out, srcs[1]), 1e-3)
}

func TestGLU(t *testing.T) {
	out := make([]float32, 1)
	Act{}.GLU(out, []float32{1}, []float32{3})
	require.InDelta(t, 3*SiLU(1), out[0], 1e-6)
	Act{SiTU: true, Beta: 4, BetaLin: 25}.GLU(out, []float32{1}, []float32{3})
	want := 4 * math.Tanh(0.25) * (1 / (1 + math.Exp(-1))) * 25 * math.Tanh(3.0/25)
	require.InDelta(t, want, out[0], 1e-6)
}

func TestRMSNorm(t *testing.T) {
	out := make([]float32, 2)
	RMSNorm(out, []float32{3, 4}, []float32{1, 2}, 0)
	s := float32(math.Sqrt(12.5))
	require.InDelta(t, 3/s, out[0], 1e-6)
	require.InDelta(t, 8/s, out[1], 1e-6)
	RMSNormGated(out, []float32{3, 4}, []float32{0, 0}, []float32{1, 2}, 0, GateSigmoid)
	require.InDelta(t, 1.5/s, out[0], 1e-6)
}
