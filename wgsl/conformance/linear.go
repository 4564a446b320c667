//go:build cgo || js

package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// linearCases are the conformance cases of Linear, LinearAccum and the fused projections (LinearNormed, LinearGated, LinearGatedNorm, LinearGLU, LinearNormedGLU, LinearKDAGate) (linear.wgsl, wgsl/linear.go).
func linearCases(add adder) {
	// Linear: GEMV (T=1) and GEMM (T>1, tiles of 8 tokens); shapes straddle
	// the 64-thread column stride, odd columns (half-word padding), token
	// tiles, and more than 65535 workgroups (2-D grid).
	for _, dt := range dtypes {
		for _, s := range [][3]int{{1, 1, 1}, {5, 7, 1}, {64, 128, 1}, {65, 129, 1}, {33, 255, 3}, {130, 200, 8},
			{70, 31, 9}, {17, 300, 17}, {300, 1000, 2}} {
			rows, cols, T := s[0], s[1], s[2]
			add("Linear", dt.String(), fmt.Sprintf("%dx%d T=%d", rows, cols, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, cols, dt, 1)
				x := RandVec(r, T*cols, 1)
				want := make([]float32, T*rows)
				ref.Linear(nil, want, x, T, W)
				out := g.Zeros(T * rows)
				check(g, g.D.Linear(out, g.Up(x), T, g.Mat(W)))
				return g.Read(out, T*rows), want
			})
		}
	}
	// LinearAccum: out += x·Wᵀ into strided rows (a residual add fused
	// into the projection), GEMV and GEMM.
	for _, dt := range dtypes {
		for _, s := range [][3]int{{5, 7, 1}, {65, 129, 1}, {33, 255, 3}, {300, 1000, 2}} {
			rows, cols, T := s[0], s[1], s[2]
			add("LinearAccum", dt.String(), fmt.Sprintf("%dx%d T=%d", rows, cols, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, cols, dt, 1)
				x := RandVec(r, T*cols, 1)
				st := rows + 5
				res := RandVec(r, T*st, 2)
				y := make([]float32, T*rows)
				ref.Linear(nil, y, x, T, W)
				want := slices.Clone(res)
				for t := range T {
					for o := range rows {
						want[t*st+o] += y[t*rows+o]
					}
				}
				out := g.Up(res)
				check(g, g.D.LinearAccum(out, st, g.Up(x), cols, T, g.Mat(W)))
				return g.Read(out, T*st), want
			})
		}
	}
	// LinearNormed: out (+)= RMSNorm(x)·Wᵀ in one GEMV equals RMSNorm then
	// Linear / LinearAccum (odd and even columns, more than one lane
	// stride); LinearGated: out (+)= (x ⊙ σ(g))·Wᵀ equals SigmoidGate then
	// Linear / LinearAccum. x (and g) must be left as they are.
	for _, dt := range dtypes {
		for _, s := range [][3]int{{5, 7, 1}, {64, 128, 0}, {65, 129, 1}, {300, 1000, 0}} {
			rows, cols, accum := s[0], s[1], s[2] == 1
			add("LinearNormed", dt.String(), fmt.Sprintf("%dx%d accum=%v", rows, cols, accum), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, cols, dt, 1)
				x := RandVec(r, cols, 3)
				nu := RandVec(r, cols, 1)
				res := RandVec(r, rows, 2)
				xn := make([]float32, cols)
				ref.RMSNorm(xn, x, nu, 1e-5)
				want := make([]float32, rows)
				ref.Linear(nil, want, xn, 1, W)
				if accum {
					ref.Axpy(1, res, want)
				}
				out := g.Up(res)
				xv := g.Up(x)
				check(g, g.D.LinearNormed(out, accum, xv, g.Mat(W), g.Up(nu), 1e-5))
				if got := g.Read(xv, cols); !slices.Equal(got, x) {
					return got, x // x must be left as it is
				}
				return g.Read(out, rows), want
			})
			add("LinearGated", dt.String(), fmt.Sprintf("%dx%d accum=%v", rows, cols, accum), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, cols, dt, 1)
				x, gt, res := RandVec(r, cols, 3), RandVec(r, cols, 3), RandVec(r, rows, 2)
				xg := make([]float32, cols)
				for i := range xg {
					xg[i] = x[i] / (1 + float32(math.Exp(float64(-gt[i]))))
				}
				want := make([]float32, rows)
				ref.Linear(nil, want, xg, 1, W)
				if accum {
					ref.Axpy(1, res, want)
				}
				out := g.Up(res)
				xv, gv := g.Up(x), g.Up(gt)
				check(g, g.D.LinearGated(out, accum, xv, gv, g.Mat(W)))
				if got := g.Read(xv, cols); !slices.Equal(got, x) {
					return got, x
				}
				return g.Read(out, rows), want
			})
		}
	}
	// LinearGLU: out (+)= act(g, u)·Wᵀ in one GEMV equals GLU then Linear /
	// LinearAccum (both activations, odd columns, g and u in one buffer as
	// a stacked projection leaves them, and apart).
	for _, dt := range dtypes {
		for _, s := range [][3]int{{5, 7, 0}, {65, 129, 1}, {130, 256, 1}, {33, 2048, 0}} {
			rows, cols, accum := s[0], s[1], s[2] == 1
			for _, act := range []ref.Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
				add("LinearGLU/"+actName(act), dt.String(), fmt.Sprintf("%dx%d accum=%v", rows, cols, accum), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					return runLinearGLU(g, r, rows, cols, dt, act, accum)
				})
			}
		}
	}
	// LinearNormedGLU: out (+)= RMSNorm(x)·Wᵀ + act(g, u)·W2ᵀ in one GEMV
	// equals LinearNormed then LinearGLU (odd widths, W2 wider and
	// narrower than W, the widest pair taken).
	for _, dt := range dtypes {
		for _, s := range [][4]int{{5, 7, 3, 0}, {65, 129, 64, 1}, {130, 256, 512, 1}, {33, 1536, 512, 0}} {
			rows, c1, c2, accum := s[0], s[1], s[2], s[3] == 1
			for _, act := range []ref.Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
				add("LinearNormedGLU/"+actName(act), dt.String(), fmt.Sprintf("%dx(%d+%d) accum=%v", rows, c1, c2, accum), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					return runLinearNormedGLU(g, r, rows, c1, c2, dt, act, accum)
				})
			}
		}
	}
	// LinearGatedNorm: (+)= RMSNormGated(x; g)·Wᵀ in one GEMV equals
	// RMSNormGated then Linear / LinearAccum (both gate functions, heads of
	// 16 and 64, odd rows).
	for _, dt := range dtypes {
		for _, s := range [][4]int{{5, 2, 16, 0}, {65, 8, 64, 1}, {130, 3, 64, 1}, {33, 32, 64, 0}} {
			rows, H, dk, accum := s[0], s[1], s[2], s[3] == 1
			for _, act := range []ref.GateAct{ref.GateSigmoid, ref.GateSiLU} {
				name := map[ref.GateAct]string{ref.GateSigmoid: "sigmoid", ref.GateSiLU: "SiLU"}[act]
				add("LinearGatedNorm/"+name, dt.String(), fmt.Sprintf("%dx%d dk=%d accum=%v", rows, H*dk, dk, accum), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					cols := H * dk
					W := RandMat(r, rows, cols, dt, 1)
					x, gt, nu := RandVec(r, cols, 3), RandVec(r, cols, 2), RandVec(r, dk, 1)
					res := RandVec(r, rows, 2)
					xn := make([]float32, cols)
					ref.RMSNormGated(xn, x, gt, nu, 1e-5, act)
					y := make([]float32, rows)
					ref.Linear(nil, y, xn, 1, W)
					want := slices.Clone(res)
					for i := range want {
						if accum {
							want[i] += y[i]
						} else {
							want[i] = y[i]
						}
					}
					out := g.Up(res)
					check(g, g.D.LinearGatedNorm(out, accum, g.Up(x), g.Up(gt), g.Mat(W), g.Up(nu), dk, 1e-5, act))
					return g.Read(out, rows), want
				})
			}
		}
	}
	// LinearKDAGate: the f_b projection with the gate as its epilogue
	// equals Linear then KDAGate (GEMV and GEMM, every dtype and gate form).
	for _, dt := range dtypes {
		for _, gc := range []struct {
			name       string
			bounded    bool
			perChannel bool
		}{{"bounded", true, false}, {"softplus", false, false}, {"softplus-per-channel", false, true}} {
			for _, s := range [][4]int{{1, 2, 16, 9}, {3, 3, 100, 33}, {9, 4, 32, 64}} {
				T, H, dk, cols := s[0], s[1], s[2], s[3]
				add("LinearKDAGate", dt.String(), fmt.Sprintf("%s T=%d H=%d dk=%d cols=%d", gc.name, T, H, dk, cols), 1e-9, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
					W := RandMat(r, H*dk, cols, dt, 1)
					x := RandVec(r, T*cols, 2)
					bias := RandVec(r, H*dk, 1)
					na := H
					if gc.perChannel {
						na = H * dk
					}
					alog := RandVec(r, na, 1.5)
					raw := make([]float32, T*H*dk)
					ref.Linear(nil, raw, x, T, W)
					want := make([]float32, len(raw))
					ref.KDAGate(want, raw, bias, alog, H, dk, gc.bounded, -5)
					e := g.Up(slices.Concat(bias, alog))
					out := g.Zeros(len(raw))
					check(g, g.D.LinearKDAGate(out, g.Up(x), T, g.Mat(W), wgsl.KDAGateEpilogue{H: H, DK: dk, DtBias: e,
						ALog: e.Buf.At(e.Off + H*dk), PerChannel: gc.perChannel, Bounded: gc.bounded, LowerBound: -5}))
					return g.Read(out, len(raw)), want
				})
			}
		}
	}
}

// actName names a GLU activation in a case's op name.
func actName(act ref.Act) string {
	if act.SiTU {
		return "SiTU"
	}
	return "SiLU"
}

// runLinearGLU runs LinearGLU on a random rows×cols W of dt (out starting
// from random values when accum; g and u in one buffer when accum, else
// apart) and the reference, GLU then Linear: g and u must be left as they
// are.
func runLinearGLU(g *GPU, r *rand.Rand, rows, cols int, dt tensor.DType, act ref.Act, accum bool) ([]float32, []float32) {
	W := RandMat(r, rows, cols, dt, 1)
	gu, res := RandVec(r, 2*cols, 2), RandVec(r, rows, 2)
	h := make([]float32, cols)
	act.GLU(h, gu[:cols], gu[cols:])
	want := make([]float32, rows)
	ref.Linear(nil, want, h, 1, oracle(W))
	if accum {
		ref.Axpy(1, res, want)
	}
	var gv, uv wgsl.View
	if accum {
		b := g.Up(gu)
		gv, uv = b, wgsl.View{Buf: b.Buf, Off: b.Off + cols}
	} else {
		gv, uv = g.Up(gu[:cols]), g.Up(gu[cols:])
	}
	out := g.Up(res)
	check(g, g.D.LinearGLU(out, accum, gv, uv, g.Mat(W), act))
	if got := append(g.Read(gv, cols), g.Read(uv, cols)...); !slices.Equal(got, gu) {
		return got, gu
	}
	return g.Read(out, rows), want
}

// runLinearNormedGLU runs LinearNormedGLU on random W [rows, c1] and W2
// [rows, c2] of dt, packed into one buffer as the runner's upload puts
// them (g and u in one buffer), and the reference: LinearNormed, then
// GLU and Linear added.
func runLinearNormedGLU(g *GPU, r *rand.Rand, rows, c1, c2 int, dt tensor.DType, act ref.Act, accum bool) ([]float32, []float32) {
	W, W2 := RandMat(r, rows, c1, dt, 1), RandMat(r, rows, c2, dt, 1)
	x, nu, gu, res := RandVec(r, c1, 3), RandVec(r, c1, 1), RandVec(r, 2*c2, 2), RandVec(r, rows, 2)
	xn, h := make([]float32, c1), make([]float32, c2)
	ref.RMSNorm(xn, x, nu, 1e-5)
	act.GLU(h, gu[:c2], gu[c2:])
	want, y := make([]float32, rows), make([]float32, rows)
	ref.Linear(nil, want, xn, 1, oracle(W))
	ref.Linear(nil, y, h, 1, oracle(W2))
	ref.Axpy(1, y, want)
	if accum {
		ref.Axpy(1, res, want)
	}
	buf, err := g.D.UploadU32(append(wgsl.PackMat(W), wgsl.PackMat(W2)...))
	check(g, err)
	g.bufs = append(g.bufs, buf)
	n1 := wgsl.MatWords(rows, c1, dt)
	w1 := &wgsl.Mat{View: buf.At(0), Rows: rows, Cols: c1, DType: dt, Stride: n1 / rows}
	w2 := &wgsl.Mat{View: buf.At(n1), Rows: rows, Cols: c2, DType: dt, Stride: wgsl.MatWords(rows, c2, dt) / rows}
	b := g.Up(gu)
	out := g.Up(res)
	check(g, g.D.LinearNormedGLU(out, accum, g.Up(x), w1, g.Up(nu), 1e-5, b, wgsl.View{Buf: b.Buf, Off: b.Off + c2}, w2, act))
	return g.Read(out, rows), want
}
