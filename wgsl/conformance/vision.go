//go:build cgo || js

package conformance

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/vision"
	"github.com/tessera-llm/tessera/wgsl"
)

// visionCases are the conformance cases of the vision tower's ops against
// core/vision: LayerNorm (with and without bias, in place), bias + GELU,
// 2D RoPE on q and k inside a fused qkv row, and non-causal attention
// within an image (several key tiles, a partial last tile).
func visionCases() []Case {
	var cs []Case
	add := func(op, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, Case{op, "F32", shape, bound, run})
	}
	for _, s := range [][2]int{{1, 1}, {3, 32}, {5, 65}, {2, 1000}} {
		rows, n := s[0], s[1]
		for _, bias := range []bool{true, false} {
			name := "LayerNorm"
			if !bias {
				name = "LayerNorm/no-bias"
			}
			add(name, fmt.Sprintf("%dx%d", rows, n), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				x, w := RandVec(r, rows*n, 3), RandVec(r, n, 1)
				for i := range x {
					x[i] += 2 // a non-zero mean
				}
				var b []float32
				var bv wgsl.View
				if bias {
					b = RandVec(r, n, 1)
					bv = g.Up(b)
				}
				want := make([]float32, rows*n)
				ref.LayerNorm(want, x, w, b, 1e-5)
				xv := g.Up(x)
				check(g, g.D.LayerNorm(xv.Rows(n), xv.Rows(n), g.Up(w), bv, rows, n, 1e-5)) // in place
				return g.Read(xv, rows*n), want
			})
		}
	}
	for _, act := range []struct {
		name string
		a    int
		f    func(float32) float32
	}{{"BiasAct/GELU-tanh", wgsl.ActGELUTanh, ref.GELUTanh}, {"BiasAct/GELU-erf", wgsl.ActGELUErf, ref.GELUErf},
		{"BiasAct/none", wgsl.ActNone, func(x float32) float32 { return x }}} {
		for _, s := range [][2]int{{1, 1}, {3, 64}, {7, 300}} {
			rows, n := s[0], s[1]
			add(act.name, fmt.Sprintf("%dx%d", rows, n), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				x, b := RandVec(r, rows*n, 4), RandVec(r, n, 1)
				want := append([]float32(nil), x...)
				vision.AddBias(want, b)
				for i, v := range want {
					want[i] = act.f(v)
				}
				out := g.Zeros(rows * n)
				check(g, g.D.BiasAct(out.Rows(n), g.Up(x).Rows(n), g.Up(b), rows, n, act.a))
				return g.Read(out, rows*n), want
			})
		}
	}
	for _, s := range [][3]int{{1, 1, 4}, {6, 2, 8}, {20, 4, 16}, {9, 3, 64}} {
		N, H, hd := s[0], s[1], s[2]
		add("RoPE2D", fmt.Sprintf("N=%d H=%d hd=%d", N, H, hd), 1e-12, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			Q := H * hd
			qkv := RandVec(r, N*3*Q, 2)
			rows, cols := make([]int, N), make([]int, N)
			for i := range N {
				rows[i], cols[i] = i/3, i%3+i/5
			}
			cos, sin := vision.RoPE2DTable(rows, cols, hd, 10000)
			q, k := make([]float32, N*Q), make([]float32, N*Q)
			for n := range N {
				copy(q[n*Q:], qkv[n*3*Q:n*3*Q+Q])
				copy(k[n*Q:], qkv[n*3*Q+Q:n*3*Q+2*Q])
			}
			ref.ApplyRoPE(q, N, H, hd, cos, sin)
			ref.ApplyRoPE(k, N, H, hd, cos, sin)
			v := g.Up(qkv)
			cv, sv := g.Up(cos), g.Up(sin)
			check(g, g.D.RoPE2D(v.Rows(3*Q), cv, sv, N, H, hd))
			check(g, g.D.RoPE2D(wgsl.View{Buf: v.Buf, Off: Q}.Rows(3*Q), cv, sv, N, H, hd))
			got := g.Read(v, N*3*Q)
			var gq, gk []float32
			for n := range N {
				gq = append(gq, got[n*3*Q:n*3*Q+Q]...)
				gk = append(gk, got[n*3*Q+Q:n*3*Q+2*Q]...)
			}
			return append(gq, gk...), append(q, k...)
		})
	}
	// Attention: one key tile, and several with a partial last one (tiles
	// of 962 keys at hd 8, 62 at hd 128, 30 at hd 256).
	for _, s := range [][3]int{{1, 1, 2}, {7, 2, 8}, {64, 4, 16}, {300, 2, 128}, {130, 1, 256}, {2100, 1, 8}} {
		N, H, hd := s[0], s[1], s[2]
		add("VisionAttention", fmt.Sprintf("N=%d H=%d hd=%d", N, H, hd), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			Q := H * hd
			qkv := RandVec(r, N*3*Q, 2)
			q, k, v := make([]float32, N*Q), make([]float32, N*Q), make([]float32, N*Q)
			for n := range N {
				copy(q[n*Q:], qkv[n*3*Q:n*3*Q+Q])
				copy(k[n*Q:], qkv[n*3*Q+Q:n*3*Q+2*Q])
				copy(v[n*Q:], qkv[n*3*Q+2*Q:n*3*Q+3*Q])
			}
			want := make([]float32, N*Q)
			ref.ImageAttention(nil, want, q, k, v, N, H, hd)
			out := g.Zeros(N * Q)
			check(g, g.D.VisionAttention(&wgsl.VisionAttnArgs{N: N, H: H, HD: hd, QKV: g.Up(qkv), Stride: 3 * Q,
				QOff: 0, KOff: Q, VOff: 2 * Q, Out: out.Rows(Q)}))
			return g.Read(out, N*Q), want
		})
	}
	return cs
}
