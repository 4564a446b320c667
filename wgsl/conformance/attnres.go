//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
)

// attnresCases are the conformance cases of AttnRes and AttnResNorm (attnres.wgsl, wgsl/attnres.go).
func attnresCases(add adder) {
	for _, s := range [][3]int{{1, 64, 1}, {3, 100, 2}, {13, 257, 3}} {
		nsrc, n, T := s[0], s[1], s[2]
		add("AttnRes", "F32", fmt.Sprintf("srcs=%d d=%d T=%d", nsrc, n, T), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			src := RandVec(r, T*nsrc*n, 3)
			w, gm := RandVec(r, n, 1), RandVec(r, n, 1)
			want := make([]float32, T*n)
			for t := 0; t < T; t++ {
				srcs := make([][]float32, nsrc)
				for i := range srcs {
					srcs[i] = src[(t*nsrc+i)*n : (t*nsrc+i+1)*n]
				}
				ref.AttnRes(want[t*n:(t+1)*n], srcs, w, gm, 1e-6, make([]float32, nsrc))
			}
			out := g.Zeros(T * n)
			check(g, g.D.AttnRes(out.Rows(n), g.Up(src).Rows(n), nsrc*n, nsrc, n, T, g.Up(w), g.Up(gm), 1e-6))
			return g.Read(out, T*n), want
		})
		// AttnResNorm: the read and the RMSNorm after it, fused (into
		// strided output rows).
		add("AttnResNorm", "F32", fmt.Sprintf("srcs=%d d=%d T=%d", nsrc, n, T), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			src := RandVec(r, T*nsrc*n, 3)
			w, gm, nw := RandVec(r, n, 1), RandVec(r, n, 1), RandVec(r, n, 1)
			want := make([]float32, T*n)
			for t := 0; t < T; t++ {
				srcs := make([][]float32, nsrc)
				for i := range srcs {
					srcs[i] = src[(t*nsrc+i)*n : (t*nsrc+i+1)*n]
				}
				row := want[t*n : (t+1)*n]
				ref.AttnRes(row, srcs, w, gm, 1e-6, make([]float32, nsrc))
				ref.RMSNorm(row, row, nw, 1e-5)
			}
			st := n + 3
			out := g.Zeros(T * st)
			check(g, g.D.AttnResNorm(out.Rows(st), g.Up(src).Rows(n), nsrc*n, nsrc, n, T, g.Up(w), g.Up(gm), 1e-6, g.Up(nw), 1e-5))
			all, got := g.Read(out, T*st), make([]float32, 0, T*n)
			for t := 0; t < T; t++ {
				got = append(got, all[t*st:t*st+n]...)
			}
			return got, want
		})
	}
}
