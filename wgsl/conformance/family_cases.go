//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// familyCases are the conformance cases of the qwen3_next and deepseek_v3
// families' ops: head repeat, RoPE (rotate-half and interleaved, partial,
// YaRN, far positions), grouped-query attention over a paged K/V cache and
// the softmax router.
func familyCases() []Case {
	var cs []Case
	add := func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, Case{op, dt, shape, bound, run})
	}
	for _, s := range [][4]int{{3, 32, 16, 2}, {1, 4, 1, 16}, {5, 48, 16, 3}} {
		T, n, dd, rep := s[0], s[1], s[2], s[3]
		add("Repeat", "F32", fmt.Sprintf("T=%d n=%d d=%d r=%d", T, n, dd, rep), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			xs := n + 3 // strided input rows
			x := RandVec(r, T*xs, 1)
			want := make([]float32, T*n*rep)
			for t := 0; t < T; t++ {
				ref.RepeatHeads(want[t*n*rep:(t+1)*n*rep], x[t*xs:t*xs+n], 1, n/dd, rep, dd)
			}
			out := g.Zeros(T * n * rep)
			check(g, g.D.Repeat(out.Rows(n*rep), g.Up(x).Rows(xs), T, n, dd, rep))
			return g.Read(out, T*n*rep), want
		})
	}
	yarn := &ref.YaRN{Factor: 4, OriginalMaxPos: 1024, BetaFast: 32, BetaSlow: 1, MScale: 0.8, MScaleAllDim: 1, TruncateCorrDims: true}
	for _, c := range []struct {
		name                  string
		T, heads, stride, off int
		dim, pos0             int
		inter                 bool
		y                     *ref.YaRN
	}{
		{"rotate-half partial", 3, 4, 32, 0, 8, 0, false, nil},
		{"interleaved k_r", 5, 1, 40, 32, 8, 7, true, nil},
		{"interleaved q_r yarn", 2, 4, 24, 16, 8, 3, true, yarn},
		{"far positions", 2, 2, 64, 0, 64, 100000, false, nil},
	} {
		add("RoPE", "F32", c.name, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			rope := ref.NewRoPE(c.dim, 10000, c.inter, c.y)
			row := c.off + c.heads*c.stride + 3
			x := RandVec(r, c.T*row, 1)
			want := append([]float32(nil), x...)
			for t := 0; t < c.T; t++ {
				rope.Apply(want[t*row+c.off:t*row+c.off+(c.heads-1)*c.stride+c.dim], c.stride, c.pos0+t)
			}
			tab := make([]float32, (c.pos0+c.T)*c.dim)
			rope.Table(tab, 0, c.pos0+c.T)
			xv := g.Up(x)
			check(g, g.D.RoPE(wgsl.RoPEArgs{T: c.T, Heads: c.heads, HStride: c.stride, Off: c.off, Half: c.dim / 2, Pos0: c.pos0,
				Interleaved: c.inter, X: xv.Rows(row), Table: g.Up(tab)}))
			return g.Read(xv, c.T*row), want
		})
	}
	for _, s := range [][6]int{{1, 0, 4, 2, 32, 128}, {5, 3, 4, 2, 32, 128}, {3, 200, 4, 1, 16, 128}, {2, 9, 2, 1, 256, 128}, {4, 130, 6, 3, 8, 256}} {
		N, pos0, H, HKV, D, page := s[0], s[1], s[2], s[3], s[4], s[5]
		add("GQA", "F32", fmt.Sprintf("N=%d pos0=%d H=%d/%d D=%d page=%d", N, pos0, H, HKV, D, page), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			w := 2 * HKV * D
			rows := RandVec(r, (pos0+N)*w, 1)
			cache := ref.NewLatentCache(w, 64)
			cache.Append(rows)
			q := RandVec(r, N*H*D, 1)
			want := make([]float32, N*H*D)
			ref.GQA(nil, &ref.GQAArgs{N: N, H: H, HKV: HKV, D: D, Pos0: pos0, Scale: 0.2, Q: q, Cache: cache, O: want})
			gc, err := g.D.NewPagedLatentCache(w, pos0+N+1, page)
			check(g, err)
			g.bufs = append(g.bufs, gc.Pages...)
			check(g, gc.AppendHost(rows))
			out := g.Zeros(N * H * D)
			check(g, g.D.GQA(&wgsl.GQAArgs{N: N, H: H, HKV: HKV, D: D, Pos0: pos0, Scale: 0.2, Q: g.Up(q), O: out, Cache: gc}))
			return g.Read(out, N*H*D), want
		})
	}
	for _, rc := range []struct {
		E, T int
		r    ref.Router
	}{
		{8, 3, ref.Router{TopK: 2, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}},
		{512, 2, ref.Router{TopK: 10, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}},
		{16, 2, ref.Router{TopK: 1, Softmax: true, Renormalize: true, RenormalizeAnyK: true, Scale: 1}},
		{16, 2, ref.Router{TopK: 3, Softmax: true, Scale: 1}},
		{32, 2, ref.Router{TopK: 1, Groups: 4, TopKGroups: 2, Renormalize: true, RenormalizeAnyK: true, Scale: 2.5}},
	} {
		add("Router", "F32", fmt.Sprintf("E=%d k=%d softmax=%v any-k=%v", rc.E, rc.r.TopK, rc.r.Softmax, rc.r.RenormalizeAnyK), 1e-11,
			func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				k := rc.r.TopK
				logits := RandVec(r, rc.T*rc.E, 4)
				idx, w := g.Zeros(rc.T*k), g.Zeros(rc.T*k)
				check(g, g.D.Route(idx, w, g.Up(logits), wgsl.View{}, rc.T, rc.E, rc.r))
				gotIdx := make([]uint32, rc.T*k)
				check(g, g.D.ReadU32(idx, gotIdx))
				gotW := g.Read(w, rc.T*k)
				want := make([]float32, 0, rc.T*k)
				for t := 0; t < rc.T; t++ {
					wi, ww := make([]int, k), make([]float32, k)
					rc.r.Route(wi, ww, logits[t*rc.E:(t+1)*rc.E], nil, make([]float32, 2*rc.E))
					for j := range wi {
						if int(gotIdx[t*k+j]) != wi[j] {
							g.t.Errorf("token %d slot %d: expert %d, want %d", t, j, gotIdx[t*k+j], wi[j])
						}
					}
					want = append(want, ww...)
				}
				return gotW, want
			})
	}
	return cs
}
