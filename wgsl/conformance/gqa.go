//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// gqaCases are the conformance cases of GQA (gqa.wgsl, wgsl/gqa.go):
// grouped-query attention over a paged K/V cache, queries past a cached
// prefix, tiles across page edges.
func gqaCases(add adder) {
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
}
