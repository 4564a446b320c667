//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// familyCases are the conformance cases of the qwen3_next and deepseek_v3
// families' elementwise ops (family.wgsl, wgsl/family.go): head repeat and
// RoPE (rotate-half and interleaved, partial, YaRN, far positions).
func familyCases(add adder) {
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
}
