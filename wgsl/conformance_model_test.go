//go:build cgo && !js

package wgsl_test

import (
	"fmt"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// modelCases are the conformance cases of the ops the whole-model Runner
// adds: embedding gather, routed and dense GLU blocks driven by GPU
// routing, argmax, sigmoid gates and strided RMSNorm.
func modelCases() []confCase {
	var cs []confCase
	add := func(op, dt, shape string, bound float64, run func(g *gpu, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, confCase{op, dt, shape, bound, run})
	}
	for _, dt := range dtypes {
		for _, s := range [][3]int{{5, 1, 1}, {17, 64, 3}, {300, 33, 9}, {40, 300, 2}} {
			V, n, T := s[0], s[1], s[2]
			add("Embed", dt.String(), fmt.Sprintf("V=%d d=%d T=%d", V, n, T), 0, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
				tab := randMat(r, V, n, dt, 2)
				ids := make([]uint32, T)
				want := make([]float32, 0, T*n)
				for t := range ids {
					ids[t] = uint32(r.IntN(V))
					want = append(want, tab.Row(int(ids[t]), make([]float32, n))...)
				}
				ib, err := g.d.UploadU32(ids)
				check(g, err)
				g.bufs = append(g.bufs, ib)
				out := g.zeros(T * (n + 3)) // strided rows
				check(g, g.d.Embed(out.Rows(n+3), g.mat(tab), ib.At(0), T))
				all := g.read(out, T*(n+3))
				var got []float32
				for t := 0; t < T; t++ {
					got = append(got, all[t*(n+3):t*(n+3)+n]...)
				}
				return got, want
			})
		}
		// Routed experts: Route on the GPU, then the selected experts'
		// GLU blocks weighted and summed, with no readback in between.
		for _, s := range [][5]int{{8, 2, 64, 32, 1}, {8, 2, 33, 65, 3}, {16, 4, 130, 17, 5}} {
			E, K, in, I, T := s[0], s[1], s[2], s[3], s[4]
			for _, act := range []ref.Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
				name := "MoE/SiLU"
				if act.SiTU {
					name = "MoE/SiTU"
				}
				add(name, dt.String(), fmt.Sprintf("E=%d K=%d in=%d I=%d T=%d", E, K, in, I, T), 1e-10, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
					var gs, us, ds []*tensor.Mat
					for e := 0; e < E; e++ {
						gs = append(gs, randMat(r, I, in, dt, 0.5))
						us = append(us, randMat(r, I, in, dt, 0.5))
						ds = append(ds, randMat(r, in, I, dt, 0.5))
					}
					x, logits, bias := randVec(r, T*in, 1), randVec(r, T*E, 3), randVec(r, E, 0.2)
					router := ref.Router{TopK: K, Renormalize: true, Scale: 2.5}
					want := make([]float32, T*in)
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
					w, err := g.d.UploadGLU(gs, us, ds)
					check(g, err)
					g.bufs = append(g.bufs, w.GateUp, w.Down)
					rt := wgsl.Routing{Idx: g.zeros(T * K), Wts: g.zeros(T * K), K: K}
					check(g, g.d.Route(rt.Idx, rt.Wts, g.up(logits), g.up(bias), T, E, router))
					hb, out := g.zeros(T*K*I), g.zeros(T*in)
					check(g, g.d.GLUGateUp(hb, g.up(x).Rows(in), T, w, rt, act))
					check(g, g.d.GLUDown(out.Rows(in), hb, T, w, rt, false))
					return g.read(out, T*in), want
				})
			}
		}
		// Dense GLU block (K = 1, no routing) accumulating into out.
		for _, s := range [][3]int{{64, 128, 1}, {33, 70, 4}} {
			in, I, T := s[0], s[1], s[2]
			add("GLUBlock", dt.String(), fmt.Sprintf("in=%d I=%d T=%d accum", in, I, T), 1e-10, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
				gm, um, dm := randMat(r, I, in, dt, 0.5), randMat(r, I, in, dt, 0.5), randMat(r, in, I, dt, 0.5)
				x, y0 := randVec(r, T*in, 1), randVec(r, T*in, 1)
				h1, h2, y := make([]float32, T*I), make([]float32, T*I), make([]float32, T*in)
				ref.Linear(nil, h1, x, T, gm)
				ref.Linear(nil, h2, x, T, um)
				ref.Act{}.GLU(h1, h1, h2)
				ref.Linear(nil, y, h1, T, dm)
				want := append([]float32(nil), y0...)
				ref.Axpy(1, y, want)
				w, err := g.d.UploadGLU([]*tensor.Mat{gm}, []*tensor.Mat{um}, []*tensor.Mat{dm})
				check(g, err)
				g.bufs = append(g.bufs, w.GateUp, w.Down)
				hb, out := g.zeros(T*I), g.up(y0)
				check(g, g.d.GLUGateUp(hb, g.up(x).Rows(in), T, w, wgsl.Routing{K: 1}, ref.Act{}))
				check(g, g.d.GLUDown(out.Rows(in), hb, T, w, wgsl.Routing{K: 1}, true))
				return g.read(out, T*in), want
			})
		}
	}
	for _, n := range []int{1, 255, 257, 5000, 70000} {
		add("Argmax", "F32", fmt.Sprint(n), 0, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
			x := randVec(r, n, 5)
			if n > 3 {
				x[n-1] = 9 // a tie: the first index must win
				x[n/2] = 9
			}
			out := g.zeros(1)
			check(g, g.d.Argmax(out, g.up(x), n))
			id := make([]uint32, 1)
			check(g, g.d.ReadU32(out, id))
			return []float32{float32(id[0])}, []float32{float32(generate.Argmax(x))}
		})
	}
	for _, n := range []int{1, 300, 4097} {
		add("SigmoidGate", "F32", fmt.Sprint(n), 1e-12, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
			o, gt := randVec(r, n, 2), randVec(r, n, 6)
			ov := g.up(o)
			for i := range o {
				o[i] *= ref.Sigmoid(gt[i])
			}
			check(g, g.d.SigmoidGate(ov.Rows(n), g.up(gt).Rows(n), ov.Rows(n), 1, n))
			return g.read(ov, n), o
		})
		add("Sigmoid", "F32", fmt.Sprint(n), 1e-12, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
			x := randVec(r, n, 6)
			xv := g.up(x)
			for i := range x {
				x[i] = ref.Sigmoid(x[i])
			}
			check(g, g.d.Sigmoid(xv.Rows(n), xv.Rows(n), 1, n))
			return g.read(xv, n), x
		})
	}
	for _, s := range [][3]int{{1, 32, 40}, {5, 32, 40}, {3, 257, 300}} {
		rows, n, stride := s[0], s[1], s[2]
		add("RMSNormRows", "F32", fmt.Sprintf("%dx%d stride %d", rows, n, stride), 1e-11, func(g *gpu, r *rand.Rand) ([]float32, []float32) {
			x, w := randVec(r, rows*stride, 3), randVec(r, n, 1)
			xv := g.up(x)
			for i := 0; i < rows; i++ {
				row := x[i*stride : i*stride+n]
				ref.RMSNorm(row, row, w, 1e-5)
			}
			check(g, g.d.RMSNormRows(xv.Rows(stride), xv.Rows(stride), g.up(w), rows, n, 1e-5)) // in place
			return g.read(xv, rows*stride), x
		})
	}
	return cs
}
