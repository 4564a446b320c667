//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// mlaCases are the conformance cases of MLA attention (absorbed and naive) (mla.wgsl, wgsl/mla.go).
func mlaCases(add adder) {
	// MLA: decode (absorbed) at contexts straddling the 128-key split, a few
	// queries with an offset; prefill (naive) across key tiles.
	for _, dt := range dtypes {
		for _, s := range [][2]int{{1, 0}, {1, 4}, {1, 127}, {1, 128}, {1, 300}, {3, 126}} {
			N, pos0 := s[0], s[1]
			add("MLAAbsorbed", dt.String(), fmt.Sprintf("N=%d pos0=%d", N, pos0), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runMLA(g, r, N, pos0, 0, dt, true)
			})
		}
		for _, s := range [][2]int{{1, 0}, {5, 0}, {7, 125}, {130, 0}, {2, 300}} {
			N, pos0 := s[0], s[1]
			add("MLANaive", dt.String(), fmt.Sprintf("N=%d pos0=%d", N, pos0), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runMLA(g, r, N, pos0, 0, dt, false)
			})
		}
		// The paged cache: keys across page edges (pages of 128 and 256
		// rows; the last key just before, on and after an edge; queries
		// spanning pages), decode and prefill.
		for _, s := range [][3]int{{1, 127, 128}, {1, 128, 128}, {1, 129, 128}, {1, 300, 128}, {3, 254, 128}, {2, 520, 256}, {1, 767, 256}} {
			N, pos0, page := s[0], s[1], s[2]
			add("MLAAbsorbed", dt.String(), fmt.Sprintf("N=%d pos0=%d page=%d", N, pos0, page), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runMLA(g, r, N, pos0, page, dt, true)
			})
		}
		for _, s := range [][3]int{{7, 125, 128}, {130, 0, 128}, {2, 300, 128}, {40, 230, 128}, {9, 505, 256}} {
			N, pos0, page := s[0], s[1], s[2]
			add("MLANaive", dt.String(), fmt.Sprintf("N=%d pos0=%d page=%d", N, pos0, page), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runMLA(g, r, N, pos0, page, dt, false)
			})
		}
	}
}

// runMLA builds a random MLA problem (H 2, DN 16, DR 8, DV 12, RKV 40;
// block formats: RKV one block) with
// a cache of pos0+N rows (in pages of pageRows rows; 0: the default, one
// page) and compares the GPU output with the reference. The cache rows go
// in by AppendHost in two parts, the second through the GPU copy (Append),
// so both cross page edges.
func runMLA(g *GPU, r *rand.Rand, N, pos0, pageRows int, dt tensor.DType, absorbed bool) ([]float32, []float32) {
	const H, DN, DR, DV = 2, 16, 8, 12
	RKV := 40
	if wgsl.BlockFormat(dt) {
		RKV = blockCols(dt)[0] // whole blocks (units)
	}
	W := RandMat(r, H*(DN+DV), RKV, dt, 0.5)
	rows := RandVec(r, (pos0+N)*(RKV+DR), 1)
	cache := ref.NewLatentCache(RKV+DR, 64)
	cache.Append(rows)
	q := RandVec(r, N*H*(DN+DR), 1)
	a := &ref.MLAArgs{N: N, H: H, DN: DN, DR: DR, DV: DV, RKV: RKV, Pos0: pos0, Scale: 0.3, Q: q, WKVB: oracle(W), Cache: cache,
		O: make([]float32, N*H*DV)}
	if pageRows == 0 {
		pageRows = wgsl.DefaultPageRows(RKV+DR, pos0+N+3)
	}
	gc, err := g.D.NewPagedLatentCache(RKV+DR, pos0+N+3, pageRows)
	check(g, err)
	g.bufs = append(g.bufs, gc.Pages...)
	half := (pos0 + N) / 2 * (RKV + DR)
	check(g, gc.AppendHost(rows[:half]))
	check(g, g.D.Append(gc, g.Up(rows[half:]), RKV+DR, pos0+N-half/(RKV+DR)))
	ga := &wgsl.MLAArgs{N: N, H: H, DN: DN, DR: DR, DV: DV, RKV: RKV, Pos0: pos0, Scale: 0.3, Q: g.Up(q), WKVB: g.Mat(W),
		Cache: gc, O: g.Zeros(N * H * DV)}
	if absorbed {
		ref.MLAAbsorbed(nil, a, &ref.MLAScratch{})
		check(g, g.D.MLAAbsorbed(ga))
	} else {
		ref.MLANaive(nil, a, &ref.MLAScratch{})
		check(g, g.D.MLANaive(ga))
	}
	return g.Read(ga.O, N*H*DV), a.O
}
