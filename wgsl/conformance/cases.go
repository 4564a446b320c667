//go:build cgo || js

package conformance

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// Case is one conformance case: Run computes the GPU result and the
// core/ref oracle on the same inputs; their NMSE must stay below Bound.
type Case struct {
	Op, DType, Shape string
	Bound            float64
	Run              func(g *GPU, r *rand.Rand) (got, want []float32)
}

var dtypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16}

func Cases() []Case {
	var cs []Case
	add := func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, Case{op, dt, shape, bound, run})
	}
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
	norms := [][2]int{{1, 1}, {3, 64}, {2, 65}, {4, 257}, {1, 4096}}
	for _, s := range norms {
		rows, n := s[0], s[1]
		shape := fmt.Sprintf("%dx%d", rows, n)
		add("RMSNorm", "F32", shape, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, w := RandVec(r, rows*n, 3), RandVec(r, n, 1)
			want := make([]float32, rows*n)
			ref.RMSNorm(want, x, w, 1e-6)
			xv := g.Up(x)
			check(g, g.D.RMSNorm(xv, xv, g.Up(w), rows, n, 1e-6)) // in place
			return g.Read(xv, rows*n), want
		})
		for _, act := range []ref.GateAct{ref.GateSigmoid, ref.GateSiLU} {
			name := map[ref.GateAct]string{ref.GateSigmoid: "RMSNormGated/sigmoid", ref.GateSiLU: "RMSNormGated/SiLU"}[act]
			add(name, "F32", shape, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				x, gt, w := RandVec(r, rows*n, 3), RandVec(r, rows*n, 4), RandVec(r, n, 1)
				want := make([]float32, rows*n)
				ref.RMSNormGated(want, x, gt, w, 1e-5, act)
				out := g.Zeros(rows * n)
				check(g, g.D.RMSNormGated(out, g.Up(x), g.Up(gt), g.Up(w), rows, n, 1e-5, act))
				return g.Read(out, rows*n), want
			})
		}
		add("L2Norm", "F32", shape, 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x := RandVec(r, rows*n, 2)
			xv := g.Up(x)
			scale := float32(1 / math.Sqrt(float64(n)))
			ref.L2Norm(x, n, 1e-6, scale)
			check(g, g.D.L2Norm(xv, xv, rows, n, 1e-6, scale))
			return g.Read(xv, rows*n), x
		})
	}
	// GLU on the two halves of a fused [rows, 2n] projection (strided rows).
	for _, act := range []struct {
		name string
		a    ref.Act
	}{{"GLU/SiLU", ref.Act{}}, {"GLU/SiTU", ref.Act{SiTU: true, Beta: 4, BetaLin: 25}}, {"GLU/SiTU-uncapped", ref.Act{SiTU: true, Beta: 4}}} {
		for _, s := range [][2]int{{1, 1}, {3, 300}, {2, 1000}, {1, 70000}} {
			rows, n := s[0], s[1]
			add(act.name, "F32", fmt.Sprintf("%dx%d", rows, n), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				gu := RandVec(r, rows*2*n, 40) // large enough to exercise the tanh caps
				want := make([]float32, rows*n)
				for i := 0; i < rows; i++ {
					act.a.GLU(want[i*n:(i+1)*n], gu[i*2*n:i*2*n+n], gu[i*2*n+n:(i+1)*2*n])
				}
				v := g.Up(gu)
				out := g.Zeros(rows * n)
				check(g, g.D.GLU(out.Rows(n), v.Rows(2*n), wgsl.View{Buf: v.Buf, Off: n}.Rows(2*n), rows, n, act.a))
				return g.Read(out, rows*n), want
			})
		}
	}
	for _, n := range []int{1, 255, 257, 5000} {
		add("Add", "F32", fmt.Sprint(n), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, y := RandVec(r, n, 1), RandVec(r, n, 1)
			want := append([]float32(nil), x...)
			ref.Axpy(1, y, want)
			xv := g.Up(x)
			check(g, g.D.Add(xv, xv, g.Up(y), n, 1))
			return g.Read(xv, n), want
		})
		add("Axpy", "F32", fmt.Sprint(n), 1e-14, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, y := RandVec(r, n, 1), RandVec(r, n, 1)
			yv := g.Up(y)
			ref.Axpy(-0.7, x, y)
			check(g, g.D.Axpy(-0.7, g.Up(x), yv, n))
			return g.Read(yv, n), y
		})
	}
	// ShortConv in pieces (state carried across calls and pieces shorter
	// than the history), compared with the reference in the same pieces.
	for _, s := range [][]int{{5, 4, 1}, {70, 4, 3, 1, 5}, {64, 2, 10}, {130, 4, 2, 2, 7}, {33, 4, 1, 1, 1}} {
		C, K, pieces := s[0], s[1], s[2:]
		add("ShortConv", "F32", fmt.Sprintf("C=%d K=%d pieces=%v", C, K, pieces), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			w := RandVec(r, C*K, 1)
			state := RandVec(r, (K-1)*C, 1)
			wv, sv := g.Up(w), g.Up(state)
			var got, want []float32
			for _, T := range pieces {
				x := RandVec(r, T*C, 2)
				o := make([]float32, T*C)
				ref.ShortConv(o, x, w, state, T, C, K)
				ov := g.Zeros(T * C)
				check(g, g.D.ShortConv(ov, g.Up(x), wv, sv, T, C, K))
				want = append(want, o...)
				got = append(got, g.Read(ov, T*C)...)
			}
			return append(got, g.Read(sv, (K-1)*C)...), append(want, state...)
		})
	}
	// KDAPrep: the fused decode-step form of ShortConv ×3, L2Norm ×2 and
	// Sigmoid; head sizes straddle the 128-thread workgroup, conv kernels
	// from 2 (one tail row) up.
	for _, s := range [][3]int{{1, 1, 2}, {2, 64, 4}, {3, 130, 3}, {2, 257, 4}} {
		H, dk, K := s[0], s[1], s[2]
		add("KDAPrep", "F32", fmt.Sprintf("H=%d dk=%d K=%d", H, dk, K), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			C := H * dk
			tails, step := (K-1)*C+3, C+5 // gaps between the tails and outputs
			x := RandVec(r, 3*C+H+2, 2)   // [q k v], then β (and 2 spare words)
			w := RandVec(r, 3*C*K, 1)
			state := RandVec(r, 2*tails+(K-1)*C, 1)
			xv, sv, ov := g.Up(x), g.Up(state), g.Zeros(2*step+C)
			qScale := float32(1 / math.Sqrt(float64(dk)))
			check(g, g.D.KDAPrep(ov, step, xv, xv.Buf.At(xv.Off+3*C), g.Up(w), sv, tails, H, dk, K, qScale, 1e-6))
			var want []float32
			wantState := slices.Clone(state)
			for j := range 3 {
				o := make([]float32, C)
				ref.ShortConv(o, x[j*C:(j+1)*C], w[j*C*K:(j+1)*C*K], wantState[j*tails:j*tails+(K-1)*C], 1, C, K)
				switch j {
				case 0:
					ref.L2Norm(o, dk, 1e-6, qScale)
				case 1:
					ref.L2Norm(o, dk, 1e-6, 1)
				}
				want = append(want, o...)
			}
			for h := range H {
				want = append(want, ref.Sigmoid(x[3*C+h]))
			}
			all := g.Read(ov, 2*step+C)
			got := append(append(append([]float32{}, all[:C]...), all[step:step+C]...), all[2*step:2*step+C]...)
			got = append(got, g.Read(xv, 3*C+H)[3*C:]...)
			return append(got, g.Read(sv, len(state))...), append(want, wantState...)
		})
	}
	for _, gc := range []struct {
		name       string
		bounded    bool
		perChannel bool
	}{{"KDAGate/bounded", true, false}, {"KDAGate/softplus", false, false}, {"KDAGate/softplus-per-channel", false, true}} {
		for _, s := range [][3]int{{1, 2, 16}, {3, 3, 100}} {
			T, H, dk := s[0], s[1], s[2]
			add(gc.name, "F32", fmt.Sprintf("T=%d H=%d dk=%d", T, H, dk), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				raw, bias := RandVec(r, T*H*dk, 30), RandVec(r, H*dk, 1)
				na := H
				if gc.perChannel {
					na = H * dk
				}
				alog := RandVec(r, na, 1.5)
				want := make([]float32, len(raw))
				ref.KDAGate(want, raw, bias, alog, H, dk, gc.bounded, -5)
				rv := g.Up(raw)
				check(g, g.D.KDAGate(rv, rv, g.Up(bias), g.Up(alog), T, H, dk, gc.perChannel, gc.bounded, -5))
				return g.Read(rv, len(raw)), want
			})
		}
	}
	// LinearNormedAccum: out += RMSNorm(x)·Wᵀ in one GEMV equals RMSNorm
	// then LinearAccum (odd and even columns, more than one lane stride).
	for _, dt := range dtypes {
		for _, s := range [][2]int{{5, 7}, {64, 128}, {65, 129}, {300, 1000}} {
			rows, cols := s[0], s[1]
			add("LinearNormedAccum", dt.String(), fmt.Sprintf("%dx%d", rows, cols), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				W := RandMat(r, rows, cols, dt, 1)
				x := RandVec(r, cols, 3)
				nu := RandVec(r, cols, 1)
				res := RandVec(r, rows, 2)
				xn := make([]float32, cols)
				ref.RMSNorm(xn, x, nu, 1e-5)
				y := make([]float32, rows)
				ref.Linear(nil, y, xn, 1, W)
				want := slices.Clone(res)
				for i := range want {
					want[i] += y[i]
				}
				out := g.Up(res)
				xv := g.Up(x)
				check(g, g.D.LinearNormedAccum(out, xv, g.Mat(W), g.Up(nu), 1e-5))
				if got := g.Read(xv, cols); !slices.Equal(got, x) {
					return got, x // x must be left as it is
				}
				return g.Read(out, rows), want
			})
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
	for _, s := range [][4]int{{1, 2, 16, 16}, {1, 3, 32, 70}, {5, 2, 64, 65}, {1, 1, 128, 128}, {300, 1, 128, 8}} {
		T, H, dk, dv := s[0], s[1], s[2], s[3]
		add("KDARecurrent", "F32", fmt.Sprintf("T=%d H=%d dk=%d dv=%d", T, H, dk, dv), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			a := kdaInputs(r, T, H, dk, dv)
			ga := &wgsl.KDAArgs{T: T, H: H, DK: dk, DV: dv, Q: g.Up(a.Q), K: g.Up(a.K), V: g.Up(a.V), G: g.Up(a.G),
				Beta: g.Up(a.Beta), O: g.Zeros(T * H * dv), S: g.Up(a.S)}
			ref.KDARecurrent(nil, a)
			check(g, g.D.KDARecurrent(ga))
			return append(g.Read(ga.O, T*H*dv), g.Read(ga.S, H*dk*dv)...), append(a.O, a.S...)
		})
	}
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
	for _, rc := range []struct {
		E, T int
		r    ref.Router
		bias bool
	}{
		{16, 1, ref.Router{TopK: 4, Scale: 1}, false},
		{64, 3, ref.Router{TopK: 6, Groups: 8, TopKGroups: 3, Renormalize: true, Scale: 2.5}, true},
		{896, 2, ref.Router{TopK: 16, Renormalize: true, Scale: 2.827}, true},
		{256, 2, ref.Router{TopK: 8, Groups: 8, TopKGroups: 4, Renormalize: true, Scale: 2.5}, true},
	} {
		add("Router", "F32", fmt.Sprintf("E=%d k=%d groups=%d/%d", rc.E, rc.r.TopK, rc.r.TopKGroups, rc.r.Groups), 1e-11,
			func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				k := rc.r.TopK
				logits := RandVec(r, rc.T*rc.E, 4)
				var bias []float32
				bv := wgsl.View{}
				if rc.bias {
					bias = RandVec(r, rc.E, 0.3)
					bv = g.Up(bias)
				}
				idx, w := g.Zeros(rc.T*k), g.Zeros(rc.T*k)
				check(g, g.D.Route(idx, w, g.Up(logits), bv, rc.T, rc.E, rc.r))
				gotIdx := make([]uint32, rc.T*k)
				check(g, g.D.ReadU32(idx, gotIdx))
				gotW := g.Read(w, rc.T*k)
				var got, want []float32
				for t := 0; t < rc.T; t++ {
					wi, ww := make([]int, k), make([]float32, k)
					rc.r.Route(wi, ww, logits[t*rc.E:(t+1)*rc.E], bias, make([]float32, 2*rc.E))
					for j := range wi {
						if int(gotIdx[t*k+j]) != wi[j] {
							g.t.Errorf("token %d slot %d: expert %d, want %d", t, j, gotIdx[t*k+j], wi[j])
						}
					}
					got, want = append(got, gotW[t*k:(t+1)*k]...), append(want, ww...)
				}
				return got, want
			})
	}
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
	cs = append(cs, modelCases()...)
	cs = append(cs, visionCases()...)
	cs = append(cs, familyCases()...)
	return cs
}

func check(g *GPU, err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

func kdaInputs(r *rand.Rand, T, H, dk, dv int) *ref.KDAArgs {
	a := &ref.KDAArgs{T: T, H: H, DK: dk, DV: dv,
		Q: RandVec(r, T*H*dk, 1), K: RandVec(r, T*H*dk, 1), V: RandVec(r, T*H*dv, 1),
		G: make([]float32, T*H*dk), Beta: make([]float32, T*H), O: make([]float32, T*H*dv), S: RandVec(r, H*dk*dv, 0.5)}
	ref.L2Norm(a.Q, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	ref.L2Norm(a.K, dk, 1e-6, 1)
	for i := range a.G {
		a.G[i] = -r.Float32() * 0.5
	}
	for i := range a.Beta {
		a.Beta[i] = r.Float32()
	}
	return a
}

// runMLA builds a random MLA problem (H 2, DN 16, DR 8, DV 12, RKV 40) with
// a cache of pos0+N rows (in pages of pageRows rows; 0: the default, one
// page) and compares the GPU output with the reference. The cache rows go
// in by AppendHost in two parts, the second through the GPU copy (Append),
// so both cross page edges.
func runMLA(g *GPU, r *rand.Rand, N, pos0, pageRows int, dt tensor.DType, absorbed bool) ([]float32, []float32) {
	const H, DN, DR, DV, RKV = 2, 16, 8, 12, 40
	W := RandMat(r, H*(DN+DV), RKV, dt, 0.5)
	rows := RandVec(r, (pos0+N)*(RKV+DR), 1)
	cache := ref.NewLatentCache(RKV+DR, 64)
	cache.Append(rows)
	q := RandVec(r, N*H*(DN+DR), 1)
	a := &ref.MLAArgs{N: N, H: H, DN: DN, DR: DR, DV: DV, RKV: RKV, Pos0: pos0, Scale: 0.3, Q: q, WKVB: W, Cache: cache,
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

// modelCases are the conformance cases of the ops the whole-model Runner
// adds: embedding gather, routed and dense GLU blocks driven by GPU
// routing, argmax, sigmoid gates and strided RMSNorm.
func modelCases() []Case {
	var cs []Case
	add := func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, Case{op, dt, shape, bound, run})
	}
	for _, dt := range dtypes {
		for _, s := range [][3]int{{5, 1, 1}, {17, 64, 3}, {300, 33, 9}, {40, 300, 2}} {
			V, n, T := s[0], s[1], s[2]
			add("Embed", dt.String(), fmt.Sprintf("V=%d d=%d T=%d", V, n, T), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
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
			})
		}
		// Routed experts: Route on the GPU, then the selected experts'
		// GLU blocks weighted and summed, with no readback in between:
		// per (token, slot) (GLUGateUp + GLUDown, decode) and grouped by
		// expert (GLUGrouped, prefill, accumulating into out; 8 and 9
		// slots per expert straddle its 8-slot tiles, T = 20 puts more
		// than one tile on an expert).
		for _, s := range [][5]int{{8, 2, 64, 32, 1}, {8, 2, 33, 65, 3}, {16, 4, 130, 17, 5}, {4, 2, 33, 17, 20}, {2, 2, 33, 17, 8}, {2, 2, 33, 17, 9}} {
			E, K, in, I, T := s[0], s[1], s[2], s[3], s[4]
			for _, act := range []ref.Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
				for _, grouped := range []bool{false, true} {
					name := "MoE/SiLU"
					if act.SiTU {
						name = "MoE/SiTU"
					}
					if grouped {
						name = "MoEGrouped" + name[3:]
					}
					add(name, dt.String(), fmt.Sprintf("E=%d K=%d in=%d I=%d T=%d", E, K, in, I, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
						var gs, us, ds []*tensor.Mat
						for e := 0; e < E; e++ {
							gs = append(gs, RandMat(r, I, in, dt, 0.5))
							us = append(us, RandMat(r, I, in, dt, 0.5))
							ds = append(ds, RandMat(r, in, I, dt, 0.5))
						}
						x, logits, bias := RandVec(r, T*in, 1), RandVec(r, T*E, 3), RandVec(r, E, 0.2)
						router := ref.Router{TopK: K, Renormalize: true, Scale: 2.5}
						start := RandVec(r, T*in, 1) // grouped: accumulate onto this
						want := make([]float32, T*in)
						if grouped {
							copy(want, start)
						}
						h1, h2, y := make([]float32, I), make([]float32, I), make([]float32, in)
						idx, wts := make([]int, K), make([]float32, K)
						for t := 0; t < T; t++ {
							router.Route(idx, wts, logits[t*E:(t+1)*E], bias, make([]float32, 2*E))
							xt := x[t*in : (t+1)*in]
							for k, e := range idx {
								ref.Linear(nil, h1, xt, 1, gs[e])
								ref.Linear(nil, h2, xt, 1, us[e])
								act.GLU(h1, h1, h2)
								ref.Linear(nil, y, h1, 1, ds[e])
								ref.Axpy(wts[k], y, want[t*in:(t+1)*in])
							}
						}
						w, err := g.D.UploadGLU(gs, us, ds)
						check(g, err)
						g.bufs = append(g.bufs, w.GateUp, w.Down)
						rt := wgsl.Routing{Idx: g.Zeros(T * K), Wts: g.Zeros(T * K), K: K}
						check(g, g.D.Route(rt.Idx, rt.Wts, g.Up(logits), g.Up(bias), T, E, router))
						if grouped {
							no, nh, ny := wgsl.GroupScratchWords(w, T, K)
							out := g.Up(start)
							sc := wgsl.GroupScratch{Ord: g.Zeros(no), H: g.Zeros(nh), Y: g.Zeros(ny)}
							check(g, g.D.GLUGrouped(out.Rows(in), g.Up(x).Rows(in), T, w, rt, act, true, sc))
							return g.Read(out, T*in), want
						}
						hb, out := g.Zeros(T*K*I), g.Zeros(T*in)
						check(g, g.D.GLUGateUp(hb, g.Up(x).Rows(in), T, w, rt, act))
						check(g, g.D.GLUDown(out.Rows(in), hb, T, w, rt, false))
						return g.Read(out, T*in), want
					})
				}
			}
		}
		// Dense GLU block (K = 1, no routing) accumulating into out.
		for _, s := range [][3]int{{64, 128, 1}, {33, 70, 4}} {
			in, I, T := s[0], s[1], s[2]
			add("GLUBlock", dt.String(), fmt.Sprintf("in=%d I=%d T=%d accum", in, I, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				gm, um, dm := RandMat(r, I, in, dt, 0.5), RandMat(r, I, in, dt, 0.5), RandMat(r, in, I, dt, 0.5)
				x, y0 := RandVec(r, T*in, 1), RandVec(r, T*in, 1)
				h1, h2, y := make([]float32, T*I), make([]float32, T*I), make([]float32, T*in)
				ref.Linear(nil, h1, x, T, gm)
				ref.Linear(nil, h2, x, T, um)
				ref.Act{}.GLU(h1, h1, h2)
				ref.Linear(nil, y, h1, T, dm)
				want := append([]float32(nil), y0...)
				ref.Axpy(1, y, want)
				w, err := g.D.UploadGLU([]*tensor.Mat{gm}, []*tensor.Mat{um}, []*tensor.Mat{dm})
				check(g, err)
				g.bufs = append(g.bufs, w.GateUp, w.Down)
				hb, out := g.Zeros(T*I), g.Up(y0)
				check(g, g.D.GLUGateUp(hb, g.Up(x).Rows(in), T, w, wgsl.Routing{K: 1}, ref.Act{}))
				check(g, g.D.GLUDown(out.Rows(in), hb, T, w, wgsl.Routing{K: 1}, true))
				return g.Read(out, T*in), want
			})
		}
	}
	for _, n := range []int{1, 255, 257, 5000, 70000} {
		add("Argmax", "F32", fmt.Sprint(n), 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x := RandVec(r, n, 5)
			if n > 3 {
				x[n-1] = 9 // a tie: the first index must win
				x[n/2] = 9
			}
			out := g.Zeros(1)
			check(g, g.D.Argmax(out, g.Up(x), n))
			id := make([]uint32, 1)
			check(g, g.D.ReadU32(out, id))
			return []float32{float32(id[0])}, []float32{float32(generate.Argmax(x))}
		})
	}
	// Sample: the GPU sampler against generate.Sampler.SampleDraw with the
	// same draws. Vocabularies straddle the 256-wide workgroup; ties sit at
	// the top-k cut and at the top of the order; settings cover each stage.
	sampleOpts := []generate.SamplerOptions{
		{Temperature: 1},
		{Temperature: 0.7, TopK: 1},
		{Temperature: 1, TopK: 5},
		{Temperature: 1.3, TopK: 40, TopP: 0.9},
		{Temperature: 1, TopP: 0.5},
		{Temperature: 0.8, MinP: 0.05},
		{Temperature: 1, TopK: 3, TopP: 0.95, MinP: 0.01},
	}
	for _, n := range []int{1, 7, 256, 257, 5000} {
		for _, o := range sampleOpts {
			shape := fmt.Sprintf("%d T=%g k=%d p=%g min-p=%g", n, o.Temperature, o.TopK, o.TopP, o.MinP)
			add("Sample", "F32", shape, 0, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
				x := RandVec(r, n, 4)
				if n > 8 {
					x[n-1], x[n/2], x[3] = 5, 5, 5 // ties at the top of the order
					x[1], x[n-3] = 4.5, 4.5
				}
				xv, wv, out := g.Up(x), g.Zeros(n), g.Zeros(1)
				smp := generate.NewSampler(o, n)
				const draws = 6
				got, want := make([]float32, draws), make([]float32, draws)
				id := make([]uint32, 1)
				for i := range draws {
					u := (float64(i) + r.Float64()) / draws
					check(g, g.D.Sample(out, xv, wv, n, wgsl.SampleParams{Temperature: o.Temperature, TopK: o.TopK, TopP: o.TopP, MinP: o.MinP, U: u}))
					check(g, g.D.ReadU32(out, id))
					c := smp.SampleDraw(slices.Clone(x), u)
					got[i], want[i] = float32(id[0]), float32(c)
					// f32 sums on the GPU, f64 on the host: a draw within
					// 1e-5 of the boundary between two tokens may pick
					// the neighbour, which a nudged draw must then give.
					if int(id[0]) != c && (smp.SampleDraw(slices.Clone(x), max(0, u-1e-5)) == int(id[0]) ||
						smp.SampleDraw(slices.Clone(x), min(u+1e-5, 1-1e-12)) == int(id[0])) {
						want[i] = got[i]
					}
				}
				return got, want
			})
		}
	}
	for _, n := range []int{1, 300, 4097} {
		add("SigmoidGate", "F32", fmt.Sprint(n), 1e-12, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			o, gt := RandVec(r, n, 2), RandVec(r, n, 6)
			ov := g.Up(o)
			for i := range o {
				o[i] *= ref.Sigmoid(gt[i])
			}
			check(g, g.D.SigmoidGate(ov.Rows(n), g.Up(gt).Rows(n), ov.Rows(n), 1, n))
			return g.Read(ov, n), o
		})
		add("Sigmoid", "F32", fmt.Sprint(n), 1e-12, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x := RandVec(r, n, 6)
			xv := g.Up(x)
			for i := range x {
				x[i] = ref.Sigmoid(x[i])
			}
			check(g, g.D.Sigmoid(xv.Rows(n), xv.Rows(n), 1, n))
			return g.Read(xv, n), x
		})
	}
	for _, s := range [][3]int{{1, 32, 40}, {5, 32, 40}, {3, 257, 300}} {
		rows, n, stride := s[0], s[1], s[2]
		add("RMSNormRows", "F32", fmt.Sprintf("%dx%d stride %d", rows, n, stride), 1e-11, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
			x, w := RandVec(r, rows*stride, 3), RandVec(r, n, 1)
			xv := g.Up(x)
			for i := 0; i < rows; i++ {
				row := x[i*stride : i*stride+n]
				ref.RMSNorm(row, row, w, 1e-5)
			}
			check(g, g.D.RMSNormRows(xv.Rows(stride), xv.Rows(stride), g.Up(w), rows, n, 1e-5)) // in place
			return g.Read(xv, rows*stride), x
		})
	}
	return cs
}
