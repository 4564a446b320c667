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

// blockCases are the conformance cases of the kernels that read weights in
// ggml block formats as they are (the *_q entry points of linear.wgsl,
// moe.wgsl and moe_grouped.wgsl; common.wgsl's qvals in embed.wgsl and
// mla.wgsl). The oracle is the CPU dequantizer (tensor.Mat.Float32, ggml's
// reference bit for bit) followed by float32 products: the dequantized
// values must be equal (Dequantize, Embed: bound 0), products within the
// float32 tolerance. Shapes cross the kernels' edges: rows that are not a
// multiple of 8 (rows per workgroup), token tiles of 8, one and several
// blocks per row, more units than lanes.
func blockCases(add adder) {
	for _, dt := range blockDTypes {
		cols := blockCols(dt)
		c0, cn := cols[0], cols[len(cols)-1]
		// Dequantize: Linear of x = the identity (T = cols one-hot tokens)
		// is Wᵀ, every sum adding exact zeros: the GPU's dequantized values.
		for _, s := range [][2]int{{9, c0}, {3, cn}} {
			rows, n := s[0], s[1]
			add("Dequantize", dt.String(), fmt.Sprintf("%dx%d", rows, n), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, n, dt, 1)
				x := make([]float32, n*n)
				for i := range n {
					x[i*n+i] = 1
				}
				want := make([]float32, n*rows) // [t, r] = W[r, t]
				w := W.Float32()
				for r := range rows {
					for t := range n {
						want[t*rows+r] = w[r*n+t]
					}
				}
				out := g.Zeros(n * rows)
				check(g, g.D.Linear(out, g.Up(x), n, g.Mat(W)))
				return g.Read(out, n*rows), want
			})
		}
		for _, s := range [][3]int{{1, c0, 1}, {7, c0, 1}, {65, cn, 1}, {130, cols[1], 1}, {9, c0, 3}, {33, cn, 9}, {17, cols[1], 17}} {
			rows, n, T := s[0], s[1], s[2]
			add("Linear", dt.String(), fmt.Sprintf("%dx%d T=%d", rows, n, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, n, dt, 1)
				x := RandVec(r, T*n, 1)
				want := make([]float32, T*rows)
				ref.Linear(nil, want, x, T, oracle(W))
				out := g.Zeros(T * rows)
				check(g, g.D.Linear(out, g.Up(x), T, g.Mat(W)))
				return g.Read(out, T*rows), want
			})
		}
		for _, T := range []int{1, 3} {
			rows, n := 33, cn
			add("LinearAccum", dt.String(), fmt.Sprintf("%dx%d T=%d", rows, n, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, n, dt, 1)
				x := RandVec(r, T*n, 1)
				st := rows + 5
				res := RandVec(r, T*st, 2)
				y := make([]float32, T*rows)
				ref.Linear(nil, y, x, T, oracle(W))
				want := slices.Clone(res)
				for t := range T {
					for o := range rows {
						want[t*st+o] += y[t*rows+o]
					}
				}
				out := g.Up(res)
				check(g, g.D.LinearAccum(out, st, g.Up(x), n, T, g.Mat(W)))
				return g.Read(out, T*st), want
			})
		}
		add("LinearNormed", dt.String(), fmt.Sprintf("65x%d accum=true", cn), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			rows, n := 65, cn
			W := RandMat(r, rows, n, dt, 1)
			x, nu, res := RandVec(r, n, 3), RandVec(r, n, 1), RandVec(r, rows, 2)
			xn := make([]float32, n)
			ref.RMSNorm(xn, x, nu, 1e-5)
			y := make([]float32, rows)
			ref.Linear(nil, y, xn, 1, oracle(W))
			want := slices.Clone(res)
			ref.Axpy(1, y, want)
			out := g.Up(res)
			check(g, g.D.LinearNormed(out, true, g.Up(x), g.Mat(W), g.Up(nu), 1e-5))
			return g.Read(out, rows), want
		})
		for _, act := range []ref.Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
			add("LinearGLU/"+actName(act), dt.String(), fmt.Sprintf("65x%d accum=true", cn), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runLinearGLU(g, r, 65, cn, dt, act, true)
			})
			add("LinearNormedGLU/"+actName(act), dt.String(), fmt.Sprintf("65x(%d+%d) accum=true", cn, c0), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runLinearNormedGLU(g, r, 65, cn, c0, dt, act, true)
			})
		}
		add("LinearGatedNorm/SiLU", dt.String(), "33x256 dk=64 accum=true", 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			rows, H, dk := 33, 4, 64
			n := H * dk
			W := RandMat(r, rows, n, dt, 1)
			x, gt, nu, res := RandVec(r, n, 3), RandVec(r, n, 2), RandVec(r, dk, 1), RandVec(r, rows, 2)
			xn := make([]float32, n)
			ref.RMSNormGated(xn, x, gt, nu, 1e-5, ref.GateSiLU)
			y := make([]float32, rows)
			ref.Linear(nil, y, xn, 1, oracle(W))
			want := slices.Clone(res)
			ref.Axpy(1, y, want)
			out := g.Up(res)
			check(g, g.D.LinearGatedNorm(out, true, g.Up(x), g.Up(gt), g.Mat(W), g.Up(nu), dk, 1e-5, ref.GateSiLU))
			return g.Read(out, rows), want
		})
		for _, T := range []int{1, 9} {
			add("LinearKDAGate", dt.String(), fmt.Sprintf("bounded T=%d H=3 dk=16 cols=%d", T, c0), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				H, dk, n := 3, 16, c0
				W := RandMat(r, H*dk, n, dt, 1)
				x, bias, alog := RandVec(r, T*n, 2), RandVec(r, H*dk, 1), RandVec(r, H, 1.5)
				raw := make([]float32, T*H*dk)
				ref.Linear(nil, raw, x, T, oracle(W))
				want := make([]float32, len(raw))
				ref.KDAGate(want, raw, bias, alog, H, dk, true, -5)
				e := g.Up(slices.Concat(bias, alog))
				out := g.Zeros(len(raw))
				check(g, g.D.LinearKDAGate(out, g.Up(x), T, g.Mat(W), wgsl.KDAGateEpilogue{H: H, DK: dk, DtBias: e,
					ALog: e.Buf.At(e.Off + H*dk), Bounded: true, LowerBound: -5}))
				return g.Read(out, len(raw)), want
			})
		}
		// Routed experts (decode per slot, with the router inside gate/up,
		// prefill grouped with 9 tokens on 4 experts: tiles of 8 slots and
		// a remainder) and a dense block.
		for _, s := range [][3]int{{c0, cols[1], 1}, {cn, c0, 9}} {
			in, I, T := s[0], s[1], s[2]
			for _, mode := range moeModes {
				add("MoE"+mode.String()+"/SiLU", dt.String(), fmt.Sprintf("E=4 K=2 in=%d I=%d T=%d", in, I, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					return runMoE(g, r, 4, 2, in, I, T, dt, ref.Act{}, mode)
				})
			}
		}
		add("GLUBlock", dt.String(), fmt.Sprintf("in=%d I=%d T=3 accum", cn, c0), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			in, I, T := cn, c0, 3
			gm, um, dm := RandMat(r, I, in, dt, 0.5), RandMat(r, I, in, dt, 0.5), RandMat(r, in, I, dt, 0.5)
			x, y0 := RandVec(r, T*in, 1), RandVec(r, T*in, 1)
			h1, h2, y := make([]float32, T*I), make([]float32, T*I), make([]float32, T*in)
			ref.Linear(nil, h1, x, T, oracle(gm))
			ref.Linear(nil, h2, x, T, oracle(um))
			ref.Act{}.GLU(h1, h1, h2)
			ref.Linear(nil, y, h1, T, oracle(dm))
			want := slices.Clone(y0)
			ref.Axpy(1, y, want)
			w, err := g.D.UploadGLU([]*tensor.Mat{gm}, []*tensor.Mat{um}, []*tensor.Mat{dm})
			check(g, err)
			g.bufs = append(g.bufs, w.GateUp, w.Down)
			hb, out := g.Zeros(T*I), g.Up(y0)
			check(g, g.D.GLUGateUp(hb, g.Up(x).Rows(in), T, w, wgsl.Routing{K: 1}, ref.Act{}))
			check(g, g.D.GLUDown(out.Rows(in), hb, T, w, wgsl.Routing{K: 1}, true))
			return g.Read(out, T*in), want
		})
		add("Embed", dt.String(), fmt.Sprintf("V=9 d=%d T=4", cn), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			return runEmbed(g, r, 9, cn, 4, dt)
		})
		for _, m := range mlaModes {
			add(m.op(), dt.String(), m.shape(fmt.Sprintf("N=3 pos0=5 RKV=%d", c0)), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				return runMLA(g, r, 3, 5, 0, 12, dt, m)
			})
		}
	}
}

// dense is m dequantized to F32 by the CPU reference (tensor.Mat.Float32).
func dense(m *tensor.Mat) *tensor.Mat { return tensor.NewF32(m.Rows, m.Cols, m.Float32()) }

// oracle is the reference's operand for m: dense for a block format (the
// CPU's own block kernels may quantize activations), else m itself.
func oracle(m *tensor.Mat) *tensor.Mat {
	if m.DType.Blocked() {
		return dense(m)
	}
	return m
}
