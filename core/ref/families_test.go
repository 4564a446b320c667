package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// naiveGDN is the Gated DeltaNet recurrence written directly from
// architecture.md §1.2–1.3 in float64 with scalar per-head decay and
// key heads shared by r value heads: per value head h (key head h/r),
//
//	S ← exp(g) S;  S ← S + k (β(v − Sᵀk))ᵀ;  o = Sᵀq
func naiveGDN(T, Hk, r, dk, dv int, q, k, v, a, b, dtBias, aLog []float32) []float32 {
	Hv := Hk * r
	o := make([]float32, T*Hv*dv)
	for h := 0; h < Hv; h++ {
		g := h / r
		S := make([]float64, dk*dv)
		for t := 0; t < T; t++ {
			x := float64(a[t*Hv+h] + dtBias[h])
			dec := math.Exp(-math.Exp(float64(aLog[h])) * (math.Max(x, 0) + math.Log1p(math.Exp(-math.Abs(x)))))
			beta := 1 / (1 + math.Exp(-float64(b[t*Hv+h])))
			kv := k[(t*Hk+g)*dk:][:dk]
			qv := q[(t*Hk+g)*dk:][:dk]
			vv := v[(t*Hv+h)*dv:][:dv]
			for i := range S {
				S[i] *= dec
			}
			for j := 0; j < dv; j++ {
				var pred float64
				for d := 0; d < dk; d++ {
					pred += S[d*dv+j] * float64(kv[d])
				}
				u := beta * (float64(vv[j]) - pred)
				var out float64
				for d := 0; d < dk; d++ {
					S[d*dv+j] += float64(kv[d]) * u
					out += S[d*dv+j] * float64(qv[d])
				}
				o[(t*Hv+h)*dv+j] = float32(out)
			}
		}
	}
	return o
}

// TestGDNOnKDAKernels checks that Gated DeltaNet run as KDA with the scalar
// decay broadcast (GDNGate) and the key heads repeated (RepeatHeads) equals
// the direct scalar-decay recurrence, in the recurrent and chunked forms,
// for dk ≠ dv and r = Hv/Hk ∈ {1, 2}.
func TestGDNOnKDAKernels(t *testing.T) {
	for _, tc := range []struct{ T, Hk, r, dk, dv, C int }{
		{1, 2, 1, 8, 8, 16}, {13, 2, 2, 8, 12, 4}, {70, 1, 3, 4, 6, 16}, {65, 2, 2, 16, 8, 64},
	} {
		t.Run(fmt.Sprintf("%+v", tc), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(tc.T), 9))
			Hv := tc.Hk * tc.r
			q := randVec(rng, tc.T*tc.Hk*tc.dk, 1)
			k := randVec(rng, tc.T*tc.Hk*tc.dk, 1)
			L2Norm(q, tc.dk, 1e-6, 1)
			L2Norm(k, tc.dk, 1e-6, 1)
			v := randVec(rng, tc.T*Hv*tc.dv, 1)
			a := randVec(rng, tc.T*Hv, 1)
			b := randVec(rng, tc.T*Hv, 1)
			dt := randVec(rng, Hv, 0.5)
			al := randVec(rng, Hv, 0.5)
			want := naiveGDN(tc.T, tc.Hk, tc.r, tc.dk, tc.dv, q, k, v, a, b, dt, al)

			qr, kr := make([]float32, tc.T*Hv*tc.dk), make([]float32, tc.T*Hv*tc.dk)
			RepeatHeads(qr, q, tc.T, tc.Hk, tc.r, tc.dk)
			RepeatHeads(kr, k, tc.T, tc.Hk, tc.r, tc.dk)
			g := make([]float32, tc.T*Hv*tc.dk)
			GDNGate(g, a, dt, al, tc.T, Hv, tc.dk)
			beta := make([]float32, len(b))
			Sigmoids(beta, b)
			for _, chunked := range []bool{false, true} {
				o := make([]float32, tc.T*Hv*tc.dv)
				args := KDAArgs{T: tc.T, H: Hv, DK: tc.dk, DV: tc.dv, Q: qr, K: kr, V: v, G: g, Beta: beta, O: o,
					S: make([]float32, Hv*tc.dk*tc.dv)}
				if chunked {
					KDAChunked(nil, &args, tc.C)
				} else {
					KDARecurrent(nil, &args)
				}
				require.Less(t, maxRelErr(o, want), 1e-5, "chunked=%v", chunked)
			}
		})
	}
}

func TestRepeatHeads(t *testing.T) {
	src := []float32{1, 2, 3, 4, 5, 6, 7, 8} // T=2, H=2, d=2
	dst := make([]float32, 16)
	RepeatHeads(dst, src, 2, 2, 2, 2)
	require.Equal(t, []float32{1, 2, 1, 2, 3, 4, 3, 4, 5, 6, 5, 6, 7, 8, 7, 8}, dst)
}

// TestRoPE checks the rotation conventions: a rotation keeps norms, q·k
// depends only on the position difference, the interleaved form is the
// rotate-half form of the de-interleaved channels, partial rotary leaves
// the tail alone, and position 0 is the identity.
func TestRoPE(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const D, rot = 12, 8
	for _, inter := range []bool{false, true} {
		r := NewRoPE(rot, 10000, inter, nil)
		q, k := randVec(rng, D, 1), randVec(rng, D, 1)
		at := func(x []float32, p int) []float32 { y := append([]float32(nil), x...); r.Apply(y, D, p); return y }
		require.Equal(t, q, at(q, 0))
		q7 := at(q, 7)
		require.Equal(t, q[rot:], q7[rot:], "channels past the rotary dim pass through")
		require.InDelta(t, Dot(q, q), Dot(q7, q7), 1e-4)
		require.InDelta(t, Dot(at(q, 9), at(k, 4)), Dot(at(q, 15), at(k, 10)), 1e-4)
	}
	// interleaved pairs (2i, 2i+1) == rotate-half pairs (i, i+rot/2) after
	// moving even channels to the first half and odd ones to the second.
	x := randVec(rng, rot, 1)
	perm := make([]float32, rot)
	for i := 0; i < rot/2; i++ {
		perm[i], perm[i+rot/2] = x[2*i], x[2*i+1]
	}
	NewRoPE(rot, 10000, true, nil).Apply(x, rot, 5)
	NewRoPE(rot, 10000, false, nil).Apply(perm, rot, 5)
	for i := 0; i < rot/2; i++ {
		require.InDelta(t, x[2*i], perm[i], 1e-6)
		require.InDelta(t, x[2*i+1], perm[i+rot/2], 1e-6)
	}
}

// TestYaRN checks YaRN's frequency blend and factors for DeepSeek-V3's
// rope_scaling (factor 40, L0 4096, β 32/1, mscale = mscale_all_dim = 1,
// rotary dim 64, θ 10000): fast-rotating pairs below the correction range
// keep their frequency, slow ones beyond it are divided by the factor, the
// cos/sin factor is 1 and the softmax scale gains mscale(40, 1)² ≈ 1.874.
func TestYaRN(t *testing.T) {
	y := &YaRN{Factor: 40, OriginalMaxPos: 4096, BetaFast: 32, BetaSlow: 1, MScale: 1, MScaleAllDim: 1, TruncateCorrDims: true}
	plain := NewRoPE(64, 10000, true, nil)
	r := NewRoPE(64, 10000, true, y)
	corr := func(rot float64) float64 { return 64 * math.Log(4096/(rot*2*math.Pi)) / (2 * math.Log(10000)) }
	low, high := int(math.Floor(corr(32))), int(math.Ceil(corr(1)))
	require.Equal(t, 10, low)
	require.Equal(t, 23, high)
	for i := range r.InvFreq {
		switch {
		case i <= low:
			require.InDelta(t, plain.InvFreq[i], r.InvFreq[i], 1e-15, "pair %d", i)
		case i >= high:
			require.InDelta(t, plain.InvFreq[i]/40, r.InvFreq[i], 1e-15, "pair %d", i)
		default:
			require.Less(t, r.InvFreq[i], plain.InvFreq[i])
			require.Greater(t, r.InvFreq[i], plain.InvFreq[i]/40)
		}
	}
	require.Equal(t, 1.0, r.CosSin)
	m := YaRNMScale(40, 1)
	require.InDelta(t, 1.8739, m*m, 1e-4)
	require.Equal(t, 1.0, YaRNMScale(1, 1))
	y2 := *y
	y2.MScale = 0.707
	require.InDelta(t, YaRNMScale(40, 0.707)/YaRNMScale(40, 1), y2.CosSinFactor(), 1e-12)
	y3 := YaRN{Factor: 4}
	require.InDelta(t, YaRNMScale(4, 1), y3.CosSinFactor(), 1e-12)
}

// TestGQA compares grouped-query attention with the softmax written out,
// for queries that start mid-sequence (a cached prefix).
func TestGQA(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, tc := range []struct{ N, Pos0, H, HKV, D int }{{1, 0, 2, 2, 4}, {5, 3, 4, 2, 8}, {3, 9, 6, 1, 4}} {
		S := tc.Pos0 + tc.N
		kw := tc.HKV * tc.D
		cache := NewLatentCache(2*kw, 4)
		rows := randVec(rng, S*2*kw, 1)
		cache.Append(rows)
		q := randVec(rng, tc.N*tc.H*tc.D, 1)
		o := make([]float32, tc.N*tc.H*tc.D)
		const scale = 0.35
		GQA(nil, &GQAArgs{N: tc.N, H: tc.H, HKV: tc.HKV, D: tc.D, Pos0: tc.Pos0, Scale: scale, Q: q, Cache: cache, O: o})
		want := make([]float32, len(o))
		for i := 0; i < tc.N; i++ {
			for h := 0; h < tc.H; h++ {
				g := h / (tc.H / tc.HKV)
				qh := q[(i*tc.H+h)*tc.D:][:tc.D]
				var sc []float64
				mx := math.Inf(-1)
				for s := 0; s <= tc.Pos0+i; s++ {
					var d float64
					for x := 0; x < tc.D; x++ {
						d += float64(qh[x]) * float64(rows[s*2*kw+g*tc.D+x])
					}
					sc = append(sc, d*scale)
					mx = math.Max(mx, d*scale)
				}
				var z float64
				for s := range sc {
					sc[s] = math.Exp(sc[s] - mx)
					z += sc[s]
				}
				for x := 0; x < tc.D; x++ {
					var acc float64
					for s := range sc {
						acc += sc[s] / z * float64(rows[s*2*kw+kw+g*tc.D+x])
					}
					want[(i*tc.H+h)*tc.D+x] = float32(acc)
				}
			}
		}
		require.Less(t, maxRelErr(o, want), 1e-5, "%+v", tc)
	}
}

// TestSoftmaxRouter: Qwen3-Next's router (softmax over all experts, top-k,
// norm_topk_prob) and the DeepSeek-V3 rule that renormalises for k = 1.
func TestSoftmaxRouter(t *testing.T) {
	logits := []float32{1, 3, 0, 2}
	e := []float64{math.E, math.Exp(3), 1, math.Exp(2)}
	z := e[0] + e[1] + e[2] + e[3]
	for _, tc := range []struct {
		name   string
		r      Router
		idx    []int
		weight []float64
	}{
		{"top2", Router{TopK: 2, Softmax: true, Scale: 1}, []int{1, 3}, []float64{e[1] / z, e[3] / z}},
		{"top2 norm", Router{TopK: 2, Softmax: true, Renormalize: true, Scale: 1}, []int{1, 3}, []float64{e[1] / (e[1] + e[3]), e[3] / (e[1] + e[3])}},
		{"top1 norm any k", Router{TopK: 1, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}, []int{1}, []float64{1}},
		{"top1 kimi", Router{TopK: 1, Softmax: true, Renormalize: true, Scale: 1}, []int{1}, []float64{e[1] / z}},
		{"sigmoid top1 any k scaled", Router{TopK: 1, Renormalize: true, RenormalizeAnyK: true, Scale: 2.5}, []int{1}, []float64{2.5}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			idx, w := make([]int, tc.r.TopK), make([]float32, tc.r.TopK)
			tc.r.Route(idx, w, logits, nil, make([]float32, 8))
			require.Equal(t, tc.idx, idx)
			for i := range w {
				require.InDelta(t, tc.weight[i], w[i], 1e-6)
			}
		})
	}
}
