//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/tensor"
)

// embedCases are the conformance cases of Embed (embed.wgsl, wgsl/embed.go).
func embedCases(add adder) {
	for _, dt := range dtypes {
		for _, s := range [][3]int{{5, 1, 1}, {17, 64, 3}, {300, 33, 9}, {40, 300, 2}} {
			V, n, T := s[0], s[1], s[2]
			add("Embed", dt.String(), fmt.Sprintf("V=%d d=%d T=%d", V, n, T), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runEmbed(g, r, V, n, T, dt)
			})
		}
	}
}

// runEmbed gathers T rows (one id outside the table) of a random V×n
// table of dt into strided rows, and the reference (tensor.Mat.Row).
func runEmbed(g *GPU, r *rand.Rand, V, n, T int, dt tensor.DType) ([]float32, []float32) {
	tab := RandMat(r, V, n, dt, 2)
	ids := make([]uint32, T)
	want := make([]float32, 0, T*n)
	for t := range ids {
		ids[t] = uint32(r.IntN(V))
		if t == 2 {
			ids[t] = uint32(V + 7) // outside the table: a zero row
			want = append(want, make([]float32, n)...)
			continue
		}
		want = append(want, tab.Row(int(ids[t]), make([]float32, n))...)
	}
	ib, err := g.D.UploadU32(ids)
	check(g, err)
	g.bufs = append(g.bufs, ib)
	out := g.Up(slices.Repeat([]float32{7}, T*(n+3))) // strided rows over non-zero words
	check(g, g.D.Embed(out.Rows(n+3), g.Mat(tab), ib.At(0), T))
	all := g.Read(out, T*(n+3))
	var got []float32
	for t := 0; t < T; t++ {
		got = append(got, all[t*(n+3):t*(n+3)+n]...)
	}
	return got, want
}
