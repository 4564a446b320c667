//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// attnresCases are the conformance cases of AttnRes, AttnResNorm
// (attnres.wgsl, wgsl/attnres.go) and a decoded token's AttnResNorm held
// back for the GEMV that reads it (DeferAttnResNorm; linear.wgsl's
// gemv_res).
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
	// AttnResLinear: DeferAttnResNorm, then Linear of the held-back read
	// (out = W·xn with the read in the GEMV's prologue), equals
	// AttnResNorm then Linear; xn itself must hold the read too. Edges: one
	// source, rows not a multiple of 8, every weight format, inputs wider
	// than the prologue takes (2,049: the read runs first), a GEMV too
	// wide for it (4,097 rows), and xn read before any GEMV (the read is
	// recorded by the readback).
	// Each shape runs with the GPU layout (8 rows per workgroup, groups 0)
	// or the CPU driver's (groups workgroups sharing the rows).
	type resShape struct {
		nsrc, d, rows, groups int
		readFirst             bool
	}
	resCase := func(dt tensor.DType, s resShape) {
		add("AttnResLinear", dt.String(), fmt.Sprintf("srcs=%d d=%d rows=%d groups=%d read-first=%v", s.nsrc, s.d, s.rows, s.groups, s.readFirst), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			nsrc, n, rows := s.nsrc, s.d, s.rows
			defer g.D.SetRepeatFusions(true, s.groups)()
			src := RandVec(r, nsrc*n, 3)
			w, gm, nw := RandVec(r, n, 1), RandVec(r, n, 1), RandVec(r, n, 1)
			W := RandMat(r, rows, n, dt, 1)
			srcs := make([][]float32, nsrc)
			for i := range srcs {
				srcs[i] = src[i*n : (i+1)*n]
			}
			xn := make([]float32, n)
			ref.AttnRes(xn, srcs, w, gm, 1e-6, make([]float32, nsrc))
			ref.RMSNorm(xn, xn, nw, 1e-5)
			want := make([]float32, rows)
			ref.Linear(nil, want, xn, 1, oracle(W))
			xv, out := g.Zeros(n), g.Zeros(rows)
			check(g, g.D.DeferAttnResNorm(xv, g.Up(src).Rows(n), nsrc, n, g.Up(w), g.Up(gm), 1e-6, g.Up(nw), 1e-5))
			var early []float32
			if s.readFirst {
				early = g.Read(xv, n)
			}
			check(g, g.D.Linear(out, xv, 1, g.Mat(W)))
			got := append(g.Read(out, rows), g.Read(xv, n)...)
			want = append(want, xn...)
			if s.readFirst {
				got, want = append(got, early...), append(want, xn...)
			}
			return got, want
		})
	}
	for _, dt := range dtypes {
		for _, s := range []resShape{{1, 64, 5, 0, false}, {3, 100, 130, 0, false}, {3, 100, 130, 3, false}, {9, 1024, 67, 0, false},
			{9, 1024, 67, 2, false}, {13, 2048, 9, 0, false}, {2, 2049, 9, 0, false}, {4, 64, 4097, 0, false}, {3, 100, 17, 0, true}} {
			resCase(dt, s)
		}
	}
	for _, dt := range blockDTypes {
		cols := blockCols(dt)
		for _, s := range []resShape{{1, cols[0], 7, 0, false}, {5, cols[len(cols)-1], 130, 0, false}, {5, cols[len(cols)-1], 130, 4, false}} {
			resCase(dt, s)
		}
	}
}
