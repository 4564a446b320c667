//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// mlaCases are the conformance cases of MLA attention (absorbed and naive) (mla.wgsl, wgsl/mla.go).
func mlaCases(add adder) {
	// MLA: decode (absorbed) at contexts straddling the 128-key split, a few
	// queries with an offset; prefill (naive) across key tiles; each with
	// the queries' own rows already cached and appended by the call.
	for _, dt := range dtypes {
		for _, m := range mlaModes {
			shapes := [][2]int{{1, 0}, {5, 0}, {7, 125}, {130, 0}, {2, 300}}
			if m.absorbed {
				shapes = [][2]int{{1, 0}, {1, 4}, {1, 127}, {1, 128}, {1, 300}, {3, 126}}
			}
			for _, s := range shapes {
				N, pos0 := s[0], s[1]
				add(m.op(), dt.String(), m.shape(fmt.Sprintf("N=%d pos0=%d", N, pos0)), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					return runMLA(g, r, N, pos0, 0, 12, dt, m)
				})
			}
			// The paged cache: keys across page edges (pages of 128 and 256
			// rows; the last key just before, on and after an edge; queries
			// and appended rows spanning pages), decode and prefill.
			paged := [][3]int{{7, 125, 128}, {130, 0, 128}, {2, 300, 128}, {40, 230, 128}, {9, 505, 256}}
			if m.absorbed {
				paged = [][3]int{{1, 127, 128}, {1, 128, 128}, {1, 129, 128}, {1, 300, 128}, {3, 254, 128}, {2, 520, 256}, {1, 767, 256}}
			}
			for _, s := range paged {
				N, pos0, page := s[0], s[1], s[2]
				add(m.op(), dt.String(), m.shape(fmt.Sprintf("N=%d pos0=%d page=%d", N, pos0, page)), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					return runMLA(g, r, N, pos0, page, 12, dt, m)
				})
			}
		}
	}
	// Decode with more values per head than a workgroup has invocations.
	for _, pos0 := range []int{5, 200} {
		add("MLAAbsorbed", "F32", fmt.Sprintf("N=1 pos0=%d DV=130 append", pos0), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			return runMLA(g, r, 1, pos0, 0, 130, tensor.F32, mlaMode{true, true})
		})
	}
	// AppendNormed: rows into one page, up to and across page edges.
	for _, s := range [][3]int{{1, 0, 128}, {1, 127, 128}, {3, 126, 128}, {300, 5, 128}, {2, 255, 256}} {
		n, pos0, page := s[0], s[1], s[2]
		add("AppendNormed", "F32", fmt.Sprintf("n=%d pos0=%d page=%d", n, pos0, page), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			return runAppendNormed(g, r, n, pos0, page)
		})
	}
}

// mlaMode is how runMLA computes the attention: absorbed (decode) or
// naive (prefill), with the queries' own rows already cached or appended
// with c_kv normed by the call (MLAAbsorbed with New; AppendNormed before
// MLANaive).
type mlaMode struct{ absorbed, appends bool }

func (m mlaMode) op() string {
	return map[bool]string{true: "MLAAbsorbed", false: "MLANaive"}[m.absorbed]
}

func (m mlaMode) shape(s string) string {
	if m.appends {
		return s + " append"
	}
	return s
}

var mlaModes = []mlaMode{{true, false}, {false, false}, {true, true}, {false, true}}

// runMLA builds a random MLA problem (H 2, DN 16, DR 8, DV values per head, RKV 40;
// block formats: RKV one block) with
// a cache of pos0+N rows (in pages of pageRows rows; 0: the default, one
// page) and compares the GPU output with the reference. The cache rows go
// in by AppendHost in two parts, the second through the GPU copy (Append),
// so both cross page edges; with m.appends the queries' own N rows go in
// by the call, from rows of a wider stride whose c_kv is normed on the way.
func runMLA(g *GPU, r *rand.Rand, N, pos0, pageRows, DV int, dt tensor.DType, m mlaMode) ([]float32, []float32) {
	const H, DN, DR = 2, 16, 8
	RKV := 40
	if wgsl.BlockFormat(dt) {
		RKV = blockCols(dt)[0] // whole blocks (units)
	}
	W := RandMat(r, H*(DN+DV), RKV, dt, 0.5)
	rows := RandVec(r, (pos0+N)*(RKV+DR), 1)
	before := pos0 + N // rows cached before the call
	var src wgsl.Strided
	var nu []float32
	const eps = 1e-5
	stride := RKV + DR + 3
	if m.appends {
		before = pos0
		// the new rows as the call gets them: c_kv scaled (un-normed), in
		// rows of a wider stride; the reference's are normed
		nu = RandVec(r, RKV, 1)
		raw := make([]float32, N*stride)
		for i := range N {
			row := rows[(pos0+i)*(RKV+DR):][:RKV+DR]
			copy(raw[i*stride:], row)
			for j := range RKV {
				raw[i*stride+j] *= 3
			}
			ref.RMSNorm(row[:RKV], raw[i*stride:][:RKV], nu, eps)
		}
		src = g.Up(raw).Rows(stride)
	}
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
	half := before / 2 * (RKV + DR)
	check(g, gc.AppendHost(rows[:half]))
	if n := before - half/(RKV+DR); n > 0 {
		check(g, g.D.Append(gc, g.Up(rows[half:before*(RKV+DR)]), RKV+DR, n))
	}
	ga := &wgsl.MLAArgs{N: N, H: H, DN: DN, DR: DR, DV: DV, RKV: RKV, Pos0: pos0, Scale: 0.3, Q: g.Up(q), WKVB: g.Mat(W),
		Cache: gc, O: g.Zeros(N * H * DV)}
	if m.appends && m.absorbed {
		ga.New, ga.Norm, ga.Eps = src, g.Up(nu), eps
	} else if m.appends {
		check(g, g.D.AppendNormed(gc, src, N, RKV, g.Up(nu), eps))
	}
	if m.absorbed {
		ref.MLAAbsorbed(nil, a, &ref.MLAScratch{})
		check(g, g.D.MLAAbsorbed(ga))
	} else {
		ref.MLANaive(nil, a, &ref.MLAScratch{})
		check(g, g.D.MLANaive(ga))
	}
	if gc.Len != pos0+N {
		g.t.Fatal(fmt.Sprintf("cache holds %d rows after the call, want %d", gc.Len, pos0+N))
	}
	return g.Read(ga.O, N*H*DV), a.O
}

// runAppendNormed appends n rows (row stride width+3, c_kv of rkv values
// normed) to a cache of cap rows in pages of pageRows already holding
// pos0, and compares every cached row with the reference's.
func runAppendNormed(g *GPU, r *rand.Rand, n, pos0, pageRows int) ([]float32, []float32) {
	const rkv, width, stride, eps = 40, 48, 51, 1e-6
	old, raw, nu := RandVec(r, pos0*width, 1), RandVec(r, n*stride, 4), RandVec(r, rkv, 1)
	want := slices.Clone(old)
	for i := range n {
		row := slices.Clone(raw[i*stride:][:width])
		ref.RMSNorm(row[:rkv], row[:rkv], nu, eps)
		want = append(want, row...)
	}
	gc, err := g.D.NewPagedLatentCache(width, pos0+n+5, pageRows)
	check(g, err)
	g.bufs = append(g.bufs, gc.Pages...)
	if pos0 > 0 {
		check(g, gc.AppendHost(old))
	}
	check(g, g.D.AppendNormed(gc, g.Up(raw).Rows(stride), n, rkv, g.Up(nu), eps))
	var got []float32
	for i, p := range gc.Pages {
		got = append(got, g.Read(p.At(0), min(pageRows, gc.Len-i*pageRows)*width)...)
		if len(got) >= gc.Len*width {
			break
		}
	}
	return got[:gc.Len*width], want
}
