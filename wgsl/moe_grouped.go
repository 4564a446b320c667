//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"errors"
	"fmt"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Op wrappers of moe_grouped.wgsl.

// GroupScratch holds the grouped expert path's scratch buffers for up to
// T tokens of K slots (GroupScratchWords gives their sizes).
type GroupScratch struct {
	Ord View // E+1 offsets, then T·K slot ids in expert order (u32)
	H   View // [T·K, I] gate/up activations
	Y   View // [T·K, Out] weighted expert outputs
}

// GroupScratchWords are the words GLUGrouped's scratch needs for T tokens.
func GroupScratchWords(w *GLUWeights, T, K int) (ord, h, y int) {
	return w.E + 1 + T*K, T * K * w.I, T * K * w.Out
}

// GroupedFits reports whether GLUGrouped can run T tokens through w within
// the per-invocation loop budget (else use GLUGateUp and GLUDown).
func GroupedFits(w *GLUWeights, T, K int) bool {
	return w != nil && T*((w.In+1)/2)/4+T <= loopBudget && T*((w.I+1)/2)/8+T <= loopBudget && w.E+2*T*K+3*w.E <= loopBudget
}

// GLUGrouped records out[t] (+)= Σ_k w[t,k] · down_e act(gate_e x[t],
// up_e x[t]) over the K experts each token selected (as GLUGateUp then
// GLUDown), grouping the T·K slots by expert on the GPU so that each
// expert's weight rows are read once per 8 of its tokens rather than once
// per token (moe_grouped.wgsl): 4 dispatches instead of 2, for prefill.
func (d *Device) GLUGrouped(out, x Strided, T int, w *GLUWeights, r Routing, act ref.Act, accum bool, sc GroupScratch) error {
	if err := w.check("GLUGrouped"); err != nil {
		return err
	}
	useIdx, err := r.check(T, "GLUGrouped")
	if err != nil || T <= 0 {
		return err
	}
	if !useIdx {
		return fmt.Errorf("wgsl: GLUGrouped: no routing (use GLUGateUp/GLUDown for a dense block)")
	}
	if !GroupedFits(w, T, r.K) {
		return fmt.Errorf("wgsl: GLUGrouped: %d tokens of %d columns exceed the per-invocation loop budget", T, w.In)
	}
	K := r.K
	no, nh, ny := GroupScratchWords(w, T, K)
	if err := errors.Join(x.check(T, w.In, "GLUGrouped x"), out.check(T, w.Out, "GLUGrouped out"),
		sc.Ord.check(no, "GLUGrouped order"), sc.H.check(nh, "GLUGrouped h"), sc.Y.check(ny, "GLUGrouped y")); err != nil {
		return err
	}
	mode, err := actMode(act, "GLUGrouped")
	if err != nil {
		return err
	}
	kern := func(entry string, dt tensor.DType) (*kernel, error) {
		return d.weightKernel("moe_grouped.wgsl", entry, 6, dt)
	}
	pr := func(dt tensor.DType, rows, cols, st, eWords, xOff, xStride, oOff, oStride int) params {
		return params{}.u(rows, cols, T, K, w.E, int(dt), 0, st, eWords, xOff, xStride, oOff, oStride,
			r.Idx.Off, r.Wts.Off, sc.Ord.Off, mode).f(act.Beta, act.BetaLin).u(b2i(accum))
	}
	steps := []struct {
		entry  string
		dt     tensor.DType // the weights the step reads (0: none)
		p      params
		bufs   []*Buffer
		groups int
	}{
		{"group", 0, pr(0, 0, 0, 0, 0, 0, 0, 0, 0), []*Buffer{w.GateUp, x.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, sc.H.Buf}, 1},
		{entry("gateup", w.DType), w.DType, pr(w.DType, w.I, w.In, matStride(w.In, w.DType), 2*w.I*matStride(w.In, w.DType), x.Off, x.Stride, sc.H.Off, w.I),
			[]*Buffer{w.GateUp, x.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, sc.H.Buf}, (w.I + 7) / 8 * w.E},
		{entry("down", w.DownDType), w.DownDType, pr(w.DownDType, w.Out, w.I, matStride(w.I, w.DownDType), w.Out*matStride(w.I, w.DownDType), sc.H.Off, w.I, sc.Y.Off, w.Out),
			[]*Buffer{w.Down, sc.H.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, sc.Y.Buf}, (w.Out + 7) / 8 * w.E},
		{"combine", 0, pr(0, w.Out, 0, 0, 0, sc.Y.Off, w.Out, out.Off, out.Stride),
			[]*Buffer{w.Down, sc.Y.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, out.Buf}, (T*w.Out + 255) / 256},
	}
	for _, st := range steps {
		k, err := kern(st.entry, st.dt)
		if err != nil {
			return err
		}
		if err := d.dispatch(k, st.p, st.bufs, st.groups); err != nil {
			return err
		}
	}
	return nil
}
