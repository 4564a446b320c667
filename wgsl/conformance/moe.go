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

// moeCases are the conformance cases of routed and dense GLU blocks (GLUGateUp, GLUDown, GLUGrouped) (moe.wgsl, wgsl/moe.go).
func moeCases(add adder) {
	for _, dt := range dtypes {
		// Routed experts: Route on the GPU, then the selected experts'
		// GLU blocks weighted and summed, with no readback in between:
		// per (token, slot) (GLUGateUp + GLUDown, decode) and grouped by
		// expert (GLUGrouped, prefill, accumulating into out; 8 and 9
		// slots per expert straddle its 8-slot tiles, T = 20 puts more
		// than one tile on an expert), and per slot with the router inside
		// the gate/up kernel (RouteGateUp + GLUDown).
		for _, s := range [][5]int{{8, 2, 64, 32, 1}, {8, 2, 33, 65, 3}, {16, 4, 130, 17, 5}, {4, 2, 33, 17, 20}, {2, 2, 33, 17, 8}, {2, 2, 33, 17, 9}} {
			E, K, in, I, T := s[0], s[1], s[2], s[3], s[4]
			for _, act := range []ref.Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
				for _, mode := range moeModes {
					name := "MoE" + mode.String() + "/SiLU"
					if act.SiTU {
						name = "MoE" + mode.String() + "/SiTU"
					}
					add(name, dt.String(), fmt.Sprintf("E=%d K=%d in=%d I=%d T=%d", E, K, in, I, T), 1e-10, func(g *GPU, r *rand.Rand) ([]float32, []float32) {
						return runMoE(g, r, E, K, in, I, T, dt, act, mode)
					})
				}
			}
		}
	}
	for _, dt := range dtypes {
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
}

// moeMode is how runMoE runs the routed experts.
type moeMode int

const (
	perSlot moeMode = iota // Route, GLUGateUp, GLUDown
	grouped                // Route, GLUGrouped
	routed                 // RouteGateUp (the router inside gate/up), GLUDown
)

var moeModes = []moeMode{perSlot, grouped, routed}

// String is the mode's suffix of the op name.
func (m moeMode) String() string { return [...]string{"", "Grouped", "Routed"}[m] }

// runMoE runs E random experts (top K of them routed on the GPU for each
// of T tokens, in → I → in) as mode says, and the reference (with mode
// routed, the routing weights too, and the ids must equal the
// reference's).
func runMoE(g *GPU, r *rand.Rand, E, K, in, I, T int, dt tensor.DType, act ref.Act, mode moeMode) ([]float32, []float32) {
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
	if mode == grouped {
		copy(want, start)
	}
	h1, h2, y := make([]float32, I), make([]float32, I), make([]float32, in)
	idx, wts := make([]int, K), make([]float32, K)
	allIdx, allWts := make([]int, 0, T*K), make([]float32, 0, T*K)
	for t := 0; t < T; t++ {
		router.Route(idx, wts, logits[t*E:(t+1)*E], bias, make([]float32, 2*E))
		allIdx, allWts = append(allIdx, idx...), append(allWts, wts...)
		xt := x[t*in : (t+1)*in]
		for k, e := range idx {
			ref.Linear(nil, h1, xt, 1, oracle(gs[e]))
			ref.Linear(nil, h2, xt, 1, oracle(us[e]))
			act.GLU(h1, h1, h2)
			ref.Linear(nil, y, h1, 1, oracle(ds[e]))
			ref.Axpy(wts[k], y, want[t*in:(t+1)*in])
		}
	}
	w, err := g.D.UploadGLU(gs, us, ds)
	check(g, err)
	g.bufs = append(g.bufs, w.GateUp, w.Down)
	rt := wgsl.Routing{Idx: g.Zeros(T * K), Wts: g.Zeros(T * K), K: K}
	if mode == routed { // the logits and x in one buffer, as a stacked projection leaves them
		lx := g.Up(append(slices.Clone(logits), x...))
		hb, out := g.Zeros(T*K*I), g.Zeros(T*in)
		a := &wgsl.RouterArgs{Logits: lx, Bias: g.Up(bias), E: E, Router: router}
		check(g, g.D.RouteGateUp(hb, wgsl.Strided{View: wgsl.View{Buf: lx.Buf, Off: lx.Off + T*E}, Stride: in}, T, w, rt, act, a))
		check(g, g.D.GLUDown(out.Rows(in), hb, T, w, rt, false))
		gotIdx := make([]uint32, T*K)
		check(g, g.D.ReadU32(rt.Idx, gotIdx))
		for i, e := range allIdx {
			if int(gotIdx[i]) != e {
				g.t.Errorf("slot %d: expert %d, want %d", i, gotIdx[i], e)
			}
		}
		return append(g.Read(out, T*in), g.Read(rt.Wts, T*K)...), append(want, allWts...)
	}
	check(g, g.D.Route(rt.Idx, rt.Wts, g.Up(logits), g.Up(bias), T, E, router))
	if mode == grouped {
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
}
