//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"slices"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Op wrappers of moe.wgsl.

// GLUWeights are E GLU blocks (routed experts, or one dense MLP / shared
// expert block with E = 1) on the GPU: GateUp holds per expert the gate
// rows then the up rows ([2·I, In]), Down per expert [Out, I], each
// matrix as PackMat lays it out. The gate and up matrices share DType,
// the down matrices DownDType (a GGUF mix may quantize them differently).
type GLUWeights struct {
	GateUp, Down     *Buffer
	E, I, In         int
	Out              int
	DType, DownDType tensor.DType
}

// UploadGLU packs E GLU blocks (gate[e], up[e] [I, In], down[e] [Out, I])
// into two buffers. Each buffer must fit one storage binding (128 MiB);
// larger expert sets must be split by the caller.
func (d *Device) UploadGLU(gate, up, down []*tensor.Mat) (*GLUWeights, error) {
	w, gu, dn, err := PackGLU(gate, up, down)
	if err != nil {
		return nil, err
	}
	if len(gu) > maxBindingWords || len(dn) > maxBindingWords {
		return nil, fmt.Errorf("wgsl: UploadGLU: %d experts of %dx%d take more than one 128 MiB binding", w.E, w.I, w.In)
	}
	if w.GateUp, err = d.UploadU32(gu); err != nil {
		return nil, fmt.Errorf("wgsl: UploadGLU gate/up: %w", err)
	}
	if w.Down, err = d.UploadU32(dn); err != nil {
		w.GateUp.Release()
		return nil, fmt.Errorf("wgsl: UploadGLU down: %w", err)
	}
	return w, nil
}

// PackGLU is UploadGLU's host half: the blocks' shapes (w without
// buffers) and the words of its two buffers, expert e's at e·len(gu)/E
// and e·len(dn)/E. Expert streaming packs one expert at a time with it,
// so a slot holds exactly what UploadGLU puts at an expert's place.
// Matrices keep their GPU dtype (GPUDType) when all gate and up matrices
// share one, and all down matrices one; a set that mixes dtypes is
// widened to F16 (gpuSet).
func PackGLU(gate, up, down []*tensor.Mat) (w *GLUWeights, gu, dn []uint32, err error) {
	return packGLU(nil, nil, gate, up, down)
}

// packGLU is PackGLU packing into gu[:0] and dn[:0] (grown only when
// their capacity is short).
func packGLU(gu, dn []uint32, gate, up, down []*tensor.Mat) (w *GLUWeights, _, _ []uint32, err error) {
	E := len(gate)
	if E == 0 || len(up) != E || len(down) != E {
		return nil, nil, nil, fmt.Errorf("wgsl: UploadGLU: %d gate, %d up, %d down matrices", len(gate), len(up), len(down))
	}
	for e := 0; e < E; e++ {
		if gate[e] == nil || up[e] == nil || down[e] == nil {
			return nil, nil, nil, fmt.Errorf("wgsl: UploadGLU: expert %d: missing matrix", e)
		}
	}
	gu0 := gpuSet(append(gate[:E:E], up...))
	gate, up, down = gu0[:E], gu0[E:], gpuSet(down)
	g0 := gate[0]
	w = &GLUWeights{E: E, I: g0.Rows, In: g0.Cols, Out: down[0].Rows, DType: g0.DType, DownDType: down[0].DType}
	for _, dt := range []tensor.DType{w.DType, w.DownDType} {
		if dt > tensor.BF16 && !BlockFormat(dt) {
			return nil, nil, nil, fmt.Errorf("wgsl: UploadGLU: unsupported dtype %v", dt)
		}
	}
	for e := 0; e < E; e++ {
		if gate[e].Rows != w.I || gate[e].Cols != w.In || up[e].Rows != w.I || up[e].Cols != w.In ||
			down[e].Rows != w.Out || down[e].Cols != w.I {
			return nil, nil, nil, fmt.Errorf("wgsl: UploadGLU: expert %d: shapes %dx%d, %dx%d, %dx%d differ from expert 0",
				e, gate[e].Rows, gate[e].Cols, up[e].Rows, up[e].Cols, down[e].Rows, down[e].Cols)
		}
	}
	gu = slices.Grow(gu[:0], E*2*MatWords(w.I, w.In, w.DType))
	dn = slices.Grow(dn[:0], E*MatWords(w.Out, w.I, w.DownDType))
	for e := 0; e < E; e++ {
		gu = appendPackMat(gu, gate[e])
		gu = appendPackMat(gu, up[e])
		dn = appendPackMat(dn, down[e])
	}
	return w, gu, dn, nil
}

// gpuSet returns ms in setDType(ms).
func gpuSet(ms []*tensor.Mat) []*tensor.Mat {
	dt := setDType(ms)
	out := make([]*tensor.Mat, len(ms))
	for i, m := range ms {
		if out[i] = gpuWeights(m); out[i].DType != dt {
			out[i] = widen(m)
		}
	}
	return out
}

// setDType is the dtype matrices that one kernel reads together have on
// the GPU: their GPU dtype (GPUDType) when they share one, else F16.
func setDType(ms []*tensor.Mat) tensor.DType {
	var dt tensor.DType
	for i, m := range ms {
		if m == nil {
			continue
		}
		if i == 0 {
			dt = gpuDType(m)
		} else if gpuDType(m) != dt {
			return tensor.F16
		}
	}
	return dt
}

// Release frees the weight buffers.
func (w *GLUWeights) Release() {
	if w != nil {
		w.GateUp.Release()
		w.Down.Release()
	}
}

// Routing names the router's output on the GPU (Device.Route): Idx [T, K]
// u32 expert ids and Wts [T, K] weights. A zero Routing (Idx.Buf nil)
// means a dense block: K must be 1 and the only block is used with weight 1.
type Routing struct {
	Idx, Wts View
	K        int
}

func (w *GLUWeights) check(what string) error {
	if w == nil || w.GateUp == nil || w.Down == nil {
		return fmt.Errorf("wgsl: %s: nil GLU weights", what)
	}
	return nil
}

func (r Routing) check(T int, what string) (useIdx bool, err error) {
	if r.K <= 0 {
		return false, fmt.Errorf("wgsl: %s: K %d", what, r.K)
	}
	if r.Idx.Buf == nil {
		if r.K != 1 {
			return false, fmt.Errorf("wgsl: %s: dense block with K %d", what, r.K)
		}
		return false, nil
	}
	if err := r.Idx.check(T*r.K, what, "idx"); err != nil {
		return false, err
	}
	return true, r.Wts.check(T*r.K, what, "weights")
}

// actMode is the GLU kernels' activation code: 0 SiLU-GLU, 1 SiTU-GLU.
func actMode(act ref.Act, op string) (int, error) {
	if !act.SiTU {
		return 0, nil
	}
	if act.Beta == 0 {
		return 0, fmt.Errorf("wgsl: %s: SiTU with β = 0", op)
	}
	return 1, nil
}

// GLUGateUp records h[t·K+k] = act(gate_e x[t], up_e x[t]) (ref.Act.GLU of
// the two projections) for the K experts e each token selected, reading
// the ids from the GPU; x rows are x.Stride words apart, h is [T·K, I].
func (d *Device) GLUGateUp(h View, x Strided, T int, w *GLUWeights, r Routing, act ref.Act) error {
	return d.gluGateUp(h, x, T, w, r, act, nil)
}

// RouterArgs are the router's operands when it runs inside the experts'
// gate/up kernel (RouteGateUp): logits [T, E], the selection bias (a
// zero View for none) and the router.
type RouterArgs struct {
	Logits, Bias View
	E            int
	Router       ref.Router
}

// RouteGateUp records Route and GLUGateUp in one dispatch: every
// workgroup routes its token from a.Logits itself (the router of
// router.wgsl, common.wgsl's route_token) and computes its rows of h for
// all K slots (so the routing is computed once per K slots' rows); the routing is also stored in r.Idx and r.Wts
// (r.K = a.Router.TopK), as Route stores it, for GLUDown and the route
// hooks.
func (d *Device) RouteGateUp(h View, x Strided, T int, w *GLUWeights, r Routing, act ref.Act, a *RouterArgs) error {
	if a == nil {
		return fmt.Errorf("wgsl: RouteGateUp: no router")
	}
	if r.Idx.Buf == nil || r.K != a.Router.TopK {
		return fmt.Errorf("wgsl: RouteGateUp: routing of K %d for a router of top %d", r.K, a.Router.TopK)
	}
	if a.E > w.E {
		return fmt.Errorf("wgsl: RouteGateUp: %d router logits for %d experts", a.E, w.E)
	}
	if err := checkRoute("RouteGateUp", r.Idx, r.Wts, a.Logits, a.Bias, T, a.E, a.Router); err != nil {
		return err
	}
	return d.gluGateUp(h, x, T, w, r, act, a)
}

// gluGateUp is GLUGateUp, or with a the router inside (RouteGateUp).
func (d *Device) gluGateUp(h View, x Strided, T int, w *GLUWeights, r Routing, act ref.Act, a *RouterArgs) error {
	if err := w.check("GLUGateUp"); err != nil {
		return err
	}
	useIdx, err := r.check(T, "GLUGateUp")
	if err != nil || T <= 0 {
		return err
	}
	if err := x.check(T, w.In, "GLUGateUp x"); err != nil {
		return err
	}
	if err := h.check(T*r.K*w.I, "GLUGateUp h"); err != nil {
		return err
	}
	mode, err := actMode(act, "GLUGateUp")
	if err != nil {
		return err
	}
	if (w.In+1)/2/d.gemvLanes() > loopBudget/2 {
		return fmt.Errorf("wgsl: GLUGateUp: %d columns exceed the per-invocation loop budget", w.In)
	}
	name, nbuf := "gateup", 5
	if a != nil {
		name, nbuf = "gateup_route", 7
	}
	k, err := d.weightKernel("moe.wgsl", entry(name, w.DType), nbuf, w.DType)
	if err != nil {
		return err
	}
	st := matStride(w.In, w.DType)
	idx, wts := r.Idx, r.Wts // zero Views (placeholder bindings) for a dense block
	p := params{}.u(w.I, w.In, T, r.K, int(w.DType), 0, st, 2*w.I*st, x.Off, x.Stride, h.Off, w.I,
		idx.Off, wts.Off, b2i(useIdx), mode).f(act.Beta, act.BetaLin).u(0)
	bufs := [7]*Buffer{w.GateUp, x.Buf, idx.Buf, wts.Buf, h.Buf}
	if a != nil {
		rt := a.Router
		p = p.u(a.E, rt.Groups, rt.TopKGroups, routeFlags(rt), b2i(a.Bias.Buf != nil)).f(rt.Scale).u(a.Logits.Off, a.Bias.Off)
		bufs[5], bufs[6] = a.Logits.Buf, a.Bias.Buf
	}
	groups := d.gemvGroups(w.I) * T * r.K
	if a != nil {
		groups = d.gemvGroups(w.I) * T // all K slots per workgroup (gate_up_routed)
	}
	return d.dispatch(k, p, bufs[:nbuf], groups)
}

// GLUDown records out[t] (+)= Σ_k w[t,k] · down_e h[t·K+k] over the K
// selected experts (weight 1 for a dense block); with accum the result is
// added to out, else it replaces it.
func (d *Device) GLUDown(out Strided, h View, T int, w *GLUWeights, r Routing, accum bool) error {
	if err := w.check("GLUDown"); err != nil {
		return err
	}
	useIdx, err := r.check(T, "GLUDown")
	if err != nil || T <= 0 {
		return err
	}
	if err := h.check(T*r.K*w.I, "GLUDown h"); err != nil {
		return err
	}
	if err := out.check(T, w.Out, "GLUDown out"); err != nil {
		return err
	}
	if r.K*((w.I+1)/2/d.gemvLanes()+1) > loopBudget {
		return fmt.Errorf("wgsl: GLUDown: %d experts of %d columns exceed the per-invocation loop budget", r.K, w.I)
	}
	k, err := d.weightKernel("moe.wgsl", entry("down", w.DownDType), 5, w.DownDType)
	if err != nil {
		return err
	}
	st := matStride(w.I, w.DownDType)
	idx, wts := r.Idx, r.Wts // zero Views (placeholder bindings) for a dense block
	p := params{}.u(w.Out, w.I, T, r.K, int(w.DownDType), 0, st, w.Out*st, h.Off, w.I, out.Off, out.Stride,
		idx.Off, wts.Off, b2i(useIdx), 0).f(0, 0).u(b2i(accum))
	return d.dispatch(k, p, []*Buffer{w.Down, h.Buf, idx.Buf, wts.Buf, out.Buf}, d.gemvGroups(w.Out)*T)
}
