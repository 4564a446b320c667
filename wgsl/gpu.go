//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"unsafe"

	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// gt is a GPU tensor: rows of cols words, row r at v.Off + r·stride.
type gt struct {
	v            View
	cols, stride int
}

func (t *gt) s() Strided { return Strided{t.v, t.stride} }

func (t *gt) contiguous() bool { return t.stride == t.cols }

func g(t nn.Tensor) *gt { return t.(*gt) }

// gpu is the WebGPU backend (nn.Backend): every op records dispatches into
// the device's command buffer (one submission per decoded token; a
// multi-token piece is submitted layer by layer, EndLayer). Weights are
// uploaded when the family declares them (nn.Uploader): matrices declared
// together are stacked so that a decoded token's projections of one input
// are one GEMV (LinearBatch), vectors declared together are contiguous
// (KDAPrep, LinearKDAGate read them through one binding).
type gpu struct {
	d      *Device
	err    error
	bufs   []*Buffer   // every buffer the backend created (weights, scratch, state)
	topK   int         // routed experts per token (sizes the expert scratch)
	gate   KDAPrepGate // KDAPrep's gate operands (kept here: passing them allocates nothing)
	step   KDAStepArgs // KDAStep's operands (likewise)
	router RouterArgs  // RoutedExperts' router operands (likewise)

	// views made during a pass come from this arena (reused by the next)
	views  []*gt
	nv     int
	inPass bool

	mats   map[*tensor.Mat]*Mat
	stacks map[*tensor.Mat]*stack
	vecs   map[*float32]View
	glus   map[*nn.GLU]*GLUWeights
	ropes  map[*ref.RoPE]View // cos/sin tables for the longest context (gpu_families.go)
	// maxContext is the positions a RoPE table covers (the runner's MaxContext).
	maxContext int

	maxIn, maxI, maxE, maxOut int     // sizes of the scratch below
	proj                      *Buffer // one token's stacked projections
	hb                        *Buffer // GLU hidden activations
	gord, gy                  *Buffer // grouped experts: slot order, weighted outputs
	tok                       *Buffer // token ids of the piece
	tokHost                   []uint32
	embIn                     *Buffer // input embeddings of the piece

	live *liveCap // routing capture of the live view (nil: off)

	// expert streaming (stream.go): slots experts per MoE layer resident
	// (0: all), the streamed layers by their first expert, the id → slot
	// table with its host copies, the counters, and a test's fault.
	expertSlots       int
	streams           map[*nn.GLU]*expertCache
	slotIdx, maskWts  *Buffer // the id → slot table; routing weights masked to one pass's experts
	idxHost, slotHost []uint32
	wtsHost, maskHost []float32
	xstats            ExpertStats
	packGU, packDN    []uint32 // a missed expert's words, reused by every miss (fill)
	uploadFault       func(layer, expert int) error
	// experts on the CPU (cpumoe.go): the first cpuLayers MoE layers;
	// moeSeen counts the MoE layers declared so far
	cpuLayers, moeSeen int
	cpuMoE             *cpuMoE
}

// stack is matrices declared together, uploaded as one of their rows
// stacked (the views are in mats).
type stack struct {
	parts []*Mat        // one GEMV each: runs of the matrices stacked (or one alone)
	list  []*tensor.Mat // the matrices, in order
}

func newGPU(d *Device, topK int) *gpu {
	return &gpu{d: d, topK: topK, mats: map[*tensor.Mat]*Mat{}, stacks: map[*tensor.Mat]*stack{},
		vecs: map[*float32]View{}, glus: map[*nn.GLU]*GLUWeights{}, ropes: map[*ref.RoPE]View{}, streams: map[*nn.GLU]*expertCache{}}
}

// newBuf creates a buffer of words words, kept for Release.
func (b *gpu) newBuf(words int) (*Buffer, error) {
	if words > maxBindingWords {
		return nil, fmt.Errorf("wgsl: buffer of %d words exceeds one 128 MiB binding", words)
	}
	buf, err := b.d.NewBuffer(max(words, 1))
	if err != nil {
		return nil, err
	}
	b.bufs = append(b.bufs, buf)
	return buf, nil
}

// bytes is the memory of the backend's buffers.
func (b *gpu) bytes() int64 {
	var n int64
	for _, buf := range b.bufs {
		n += 4 * int64(buf.Words())
	}
	return n
}

// release frees every buffer the backend created.
func (b *gpu) release() {
	b.d.dropRes()
	for _, buf := range b.bufs {
		buf.Release()
	}
	b.bufs = nil
	b.cpuMoE.close()
	b.cpuMoE = nil
}

// fail keeps the first error of the pass.
func (b *gpu) fail(err error) {
	if err != nil && b.err == nil {
		b.err = err
	}
}

func (b *gpu) Err() error { return b.err }

// Begin starts a forward pass (recording an AttnRes read the last one
// held back for a GEMV that never came).
func (b *gpu) Begin() {
	b.err, b.nv, b.inPass = nil, 0, true
	b.fail(b.d.flushRes())
}

func (b *gpu) end() { b.inPass = false }

func (b *gpu) view(t gt) nn.Tensor {
	if !b.inPass {
		p := new(gt)
		*p = t
		return p
	}
	if b.nv == len(b.views) {
		b.views = append(b.views, new(gt))
	}
	p := b.views[b.nv]
	b.nv++
	*p = t
	return p
}

// ---- weights ----

func (b *gpu) mat(m *tensor.Mat) *Mat {
	if m == nil {
		return nil
	}
	w, ok := b.mats[m]
	if !ok {
		b.fail(fmt.Errorf("wgsl: a %d×%d matrix was not declared for upload", m.Rows, m.Cols))
		return nil
	}
	return w
}

func (b *gpu) vec(v []float32) View {
	if len(v) == 0 {
		return View{}
	}
	w, ok := b.vecs[unsafe.SliceData(v)]
	if !ok {
		b.fail(fmt.Errorf("wgsl: a vector of %d values was not declared for upload", len(v)))
	}
	return w
}

func (b *gpu) glu(w *nn.GLU) *GLUWeights {
	gw, ok := b.glus[w]
	if !ok {
		b.fail(fmt.Errorf("wgsl: a GLU block was not declared for upload"))
	}
	return gw
}

// ---- basic ops ----

func (b *gpu) Alloc(rows, cols int) nn.Tensor {
	buf, err := b.newBuf(rows * cols)
	b.fail(err)
	if buf == nil {
		return &gt{cols: cols, stride: cols}
	}
	return &gt{v: buf.At(0), cols: cols, stride: cols}
}

func (b *gpu) Rows(t nn.Tensor, r0 int) nn.Tensor {
	x := g(t)
	return b.view(gt{v: View{x.v.Buf, x.v.Off + r0*x.stride}, cols: x.cols, stride: x.stride})
}

func (b *gpu) Reshape(t nn.Tensor, cols int) nn.Tensor {
	x := g(t)
	if !x.contiguous() {
		b.fail(fmt.Errorf("wgsl: Reshape of a strided tensor"))
	}
	return b.view(gt{v: x.v, cols: cols, stride: cols})
}

func (b *gpu) Cols(t nn.Tensor, c0, n int) nn.Tensor {
	x := g(t)
	return b.view(gt{v: View{x.v.Buf, x.v.Off + c0}, cols: n, stride: x.stride})
}

func (b *gpu) Embed(out nn.Tensor, table *tensor.Mat, ids []int) {
	if b.err != nil {
		return
	}
	T := len(ids)
	for i, id := range ids {
		b.tokHost[i] = uint32(id)
	}
	if err := b.tok.WriteU32(0, b.tokHost[:T]); err != nil {
		b.fail(fmt.Errorf("wgsl: forward: upload tokens: %w", err))
		return
	}
	b.fail(b.d.Embed(g(out).s(), b.mat(table), b.tok.At(0), T))
}

// SetRows writes host rows: straight into a contiguous out (after
// submitting what is recorded, so the write does not overtake it), else
// into the input scratch and copied.
func (b *gpu) SetRows(out nn.Tensor, data []float32, T int) {
	if b.err != nil {
		return
	}
	o := g(out)
	if o.contiguous() {
		b.fail(b.d.Flush())
		if err := o.v.Buf.WriteF32(o.v.Off, data[:T*o.cols]); err != nil && b.err == nil {
			b.fail(fmt.Errorf("wgsl: upload rows: %w", err))
		}
		return
	}
	if b.embIn == nil {
		b.fail(fmt.Errorf("wgsl: SetRows into strided rows needs the input scratch"))
		return
	}
	if err := b.embIn.WriteF32(0, data[:T*o.cols]); err != nil {
		b.fail(fmt.Errorf("wgsl: forward: upload embeddings: %w", err))
		return
	}
	b.fail(b.d.Copy(o.s(), b.embIn.At(0).Rows(o.cols), T, o.cols))
}

func (b *gpu) Copy(out, x nn.Tensor, T int) {
	if b.err == nil {
		o := g(out)
		b.fail(b.d.Copy(o.s(), g(x).s(), T, o.cols))
	}
}

func (b *gpu) Add(out, x nn.Tensor, T int) {
	if b.err != nil {
		return
	}
	o, s := g(out), g(x)
	if o.contiguous() && s.contiguous() {
		b.fail(b.d.Add(o.v, o.v, s.v, T*o.cols, 1))
		return
	}
	for t := 0; t < T && b.err == nil; t++ {
		ro := View{o.v.Buf, o.v.Off + t*o.stride}
		b.fail(b.d.Add(ro, ro, View{s.v.Buf, s.v.Off + t*s.stride}, o.cols, 1))
	}
}

func (b *gpu) Linear(out, x nn.Tensor, T int, W *tensor.Mat) {
	if b.err == nil {
		o, s := g(out), g(x)
		b.fail(b.d.LinearStrided(o.v, o.stride, s.v, s.stride, T, b.mat(W)))
	}
}

func (b *gpu) RMSNorm(out, x nn.Tensor, T int, w []float32, eps float32) {
	if b.err != nil {
		return
	}
	o, s := g(out), g(x)
	if o.contiguous() && s.contiguous() {
		b.fail(b.d.RMSNorm(o.v, s.v, b.vec(w), T*o.cols/len(w), len(w), eps))
		return
	}
	// strided rows: one dispatch per group of len(w) values of each row
	n := len(w)
	for c0 := 0; c0 < o.cols && b.err == nil; c0 += n {
		b.fail(b.d.RMSNormRows(Strided{View{o.v.Buf, o.v.Off + c0}, o.stride}, Strided{View{s.v.Buf, s.v.Off + c0}, s.stride}, b.vec(w), T, n, eps))
	}
}

func (b *gpu) RMSNormGated(out, x, gate nn.Tensor, T int, w []float32, eps float32, act ref.GateAct) {
	if b.err == nil {
		o := g(out)
		b.fail(b.d.RMSNormGated(o.v, g(x).v, g(gate).v, b.vec(w), T*o.cols/len(w), len(w), eps, act))
	}
}

func (b *gpu) L2Norm(x nn.Tensor, T, n int, eps, scale float32) {
	if b.err == nil {
		s := g(x)
		b.fail(b.d.L2Norm(s.v, s.v, T*s.cols/n, n, eps, scale))
	}
}

func (b *gpu) Sigmoid(x nn.Tensor, T int) {
	if b.err == nil {
		s := g(x)
		n := T * s.cols
		b.fail(b.d.Sigmoid(s.v.Rows(n), s.v.Rows(n), 1, n))
	}
}

func (b *gpu) SigmoidGate(x, gate nn.Tensor, T int) {
	if b.err == nil {
		s := g(x)
		n := T * s.cols
		b.fail(b.d.SigmoidGate(s.v.Rows(n), g(gate).v.Rows(n), s.v.Rows(n), 1, n))
	}
}

func (b *gpu) ShortConv(out, x nn.Tensor, T int, w []float32, tail nn.Tensor, K int) {
	if b.err == nil {
		s := g(x)
		b.fail(b.d.ShortConv(g(out).v, s.v, b.vec(w), g(tail).v, T, s.cols, K))
	}
}

// gateEpilogue is the KDA gate's parameters on the device.
func (b *gpu) gateEpilogue(a nn.KDAGateArgs) KDAGateEpilogue {
	hd := a.H * a.DK
	return KDAGateEpilogue{H: a.H, DK: a.DK, DtBias: b.vec(a.DtBias), ALog: b.vec(a.ALog),
		PerChannel: len(a.ALog) == hd && hd != a.H, Bounded: a.Bounded, LowerBound: a.LowerBound}
}

func (b *gpu) KDAGate(gv nn.Tensor, T int, a nn.KDAGateArgs) {
	if b.err == nil {
		e := b.gateEpilogue(a)
		x := g(gv).v
		b.fail(b.d.KDAGate(x, x, e.DtBias, e.ALog, T, a.H, a.DK, e.PerChannel, a.Bounded, a.LowerBound))
	}
}

func (b *gpu) DeltaRule(a *nn.DeltaArgs) {
	if b.err == nil {
		b.fail(b.d.KDA(&KDAArgs{T: a.T, H: a.H, DK: a.DK, DV: a.DV, Q: g(a.Q).v, K: g(a.K).v, V: g(a.V).v,
			G: g(a.G).v, Beta: g(a.Beta).v, O: g(a.O).v, S: g(a.S).v}))
	}
}

func (b *gpu) Append(c nn.Cache, rows nn.Tensor, T int) {
	if b.err == nil {
		s := g(rows)
		b.fail(b.d.Append(c.(*LatentCache), s.v, s.stride, T))
	}
}

func (b *gpu) LatentAttention(a *nn.LatentArgs) {
	if b.err != nil {
		return
	}
	c := a.Cache.(*LatentCache)
	m := &MLAArgs{N: a.T, H: a.H, DN: a.DN, DR: a.DR, DV: a.DV, RKV: a.RKV, Pos0: c.Len - a.T,
		Scale: a.Scale, Q: g(a.Q).v, WKVB: b.mat(a.WKVB), Cache: c, O: g(a.O).v}
	if a.T == 1 {
		b.fail(b.d.MLAAbsorbed(m))
	} else {
		b.fail(b.d.MLANaive(m))
	}
}

// AppendAttend: a decoded token's latent row is appended, c_kv normed, by
// the kernel that prepares the absorbed attention (MLAAbsorbed with New);
// a prefill piece's rows by one kernel per cache page (AppendNormed)
// before the naive attention.
func (b *gpu) AppendAttend(a *nn.LatentArgs, rows nn.Tensor, norm []float32, eps float32) bool {
	if b.err != nil {
		return false
	}
	c, r, nu := a.Cache.(*LatentCache), g(rows), b.vec(norm)
	if a.T != 1 {
		b.fail(b.d.AppendNormed(c, r.s(), a.T, a.RKV, nu, eps))
		b.LatentAttention(a)
		return true
	}
	b.fail(b.d.MLAAbsorbed(&MLAArgs{N: 1, H: a.H, DN: a.DN, DR: a.DR, DV: a.DV, RKV: a.RKV, Pos0: c.Len,
		Scale: a.Scale, Q: g(a.Q).v, WKVB: b.mat(a.WKVB), Cache: c, O: g(a.O).v, New: r.s(), Norm: nu, Eps: eps}))
	return true
}

func (b *gpu) GLU(out, x nn.Tensor, T int, w *nn.GLU, act ref.Act, accum bool) {
	if b.err != nil {
		return
	}
	gw, dense := b.glu(w), Routing{K: 1}
	b.fail(b.d.GLUGateUp(b.hb.At(0), g(x).s(), T, gw, dense, act))
	if b.err == nil {
		b.fail(b.d.GLUDown(g(out).s(), b.hb.At(0), T, gw, dense, accum))
	}
}

func (b *gpu) GLUAct(gate, up nn.Tensor, T int, act ref.Act) {
	if b.err == nil {
		gs := g(gate)
		b.fail(b.d.GLU(gs.s(), gs.s(), g(up).s(), T, gs.cols, act))
	}
}

func (b *gpu) Route(rt nn.Routing, logits nn.Tensor, T int, bias []float32, r ref.Router) {
	if b.err == nil {
		l := g(logits)
		var bv View
		if bias != nil {
			bv = b.vec(bias)
		}
		b.fail(b.d.Route(g(rt.Idx).v, g(rt.Wts).v, l.v, bv, T, l.cols, r))
		b.capture(rt.Idx, T, r.TopK)
	}
}

// groupExperts: prefill pieces run the routed experts grouped by expert
// (GLUGrouped); tests and benchmarks turn it off to compare.
var groupExperts = true

// Experts runs the routed experts: per (token, slot) for a decode step;
// grouped by expert for a prefill piece (each selected expert's weights
// read once per 8 of its tokens, GLUGrouped).
func (b *gpu) Experts(out, x nn.Tensor, T int, experts []nn.GLU, rt nn.Routing, act ref.Act, accum bool) {
	if b.err != nil {
		return
	}
	run := func(out, x Strided, T int, gw *GLUWeights, r Routing, accum bool) {
		if groupExperts && T > 1 && b.gord != nil && GroupedFits(gw, T, r.K) {
			sc := GroupScratch{Ord: b.gord.At(0), H: b.hb.At(0), Y: b.gy.At(0)}
			b.fail(b.d.GLUGrouped(out, x, T, gw, r, act, accum, sc))
			return
		}
		b.fail(b.d.GLUGateUp(b.hb.At(0), x, T, gw, r, act))
		if b.err == nil {
			b.fail(b.d.GLUDown(out, b.hb.At(0), T, gw, r, accum))
		}
	}
	if b.cpuMoE != nil && b.cpuMoE.layers[&experts[0]] {
		b.cpuExperts(g(out), g(x), T, experts, rt, act, accum)
		return
	}
	if c := b.streams[&experts[0]]; c != nil {
		b.streamExperts(c, g(out), g(x), T, g(rt.Idx).v, g(rt.Wts).v, rt.K, accum, run)
		return
	}
	run(g(out).s(), g(x).s(), T, b.glu(&experts[0]), Routing{Idx: g(rt.Idx).v, Wts: g(rt.Wts).v, K: rt.K}, accum)
}

// RoutedExperts: a decoded token's router inside the experts' gate/up
// kernel (RouteGateUp), then their down projections; experts kept on the
// CPU or streamed, and devices without the repeating fusions (SetRepeatFusions: software
// adapters), take Route then
// Experts.
func (b *gpu) RoutedExperts(out, x nn.Tensor, T int, experts []nn.GLU, logits nn.Tensor, bias []float32, r ref.Router, rt nn.Routing, act ref.Act, accum bool) bool {
	if T != 1 || b.err != nil || b.streams[&experts[0]] != nil || b.cpuMoE != nil && b.cpuMoE.layers[&experts[0]] || !b.d.repeatFusions() {
		return false
	}
	l := g(logits)
	b.router = RouterArgs{Logits: l.v, E: l.cols, Router: r}
	if bias != nil {
		b.router.Bias = b.vec(bias)
	}
	gw, rg := b.glu(&experts[0]), Routing{Idx: g(rt.Idx).v, Wts: g(rt.Wts).v, K: rt.K}
	b.fail(b.d.RouteGateUp(b.hb.At(0), g(x).s(), T, gw, rg, act, &b.router))
	b.capture(rt.Idx, T, r.TopK)
	if b.err == nil {
		b.fail(b.d.GLUDown(g(out).s(), b.hb.At(0), T, gw, rg, accum))
	}
	return true
}

// slots checks that srcs are consecutive slots of one token-major buffer
// (source i of token t at srcs[0] + t·stride + i·cols) and returns them as
// the AttnRes kernels read them.
func (b *gpu) slots(srcs []nn.Tensor) (Strided, bool) {
	s0 := g(srcs[0])
	for i, s := range srcs {
		x := g(s)
		if x.v.Buf != s0.v.Buf || x.v.Off != s0.v.Off+i*s0.cols || x.stride != s0.stride || x.cols != s0.cols {
			return Strided{}, false
		}
	}
	return s0.v.Rows(s0.cols), true
}

func (b *gpu) AttnRes(out nn.Tensor, srcs []nn.Tensor, T int, w, gamma []float32, eps float32) {
	if b.err != nil {
		return
	}
	src, ok := b.slots(srcs)
	if !ok {
		b.fail(fmt.Errorf("wgsl: AttnRes: the sources are not consecutive slots of one buffer"))
		return
	}
	o, s0 := g(out), g(srcs[0])
	b.fail(b.d.AttnRes(o.s(), src, s0.stride, len(srcs), s0.cols, T, b.vec(w), b.vec(gamma), eps))
}

// ---- fused capabilities ----

// LinearBatch computes a decoded token's projections of one input with
// one GEMV over their stacked weights (declared together).
func (b *gpu) LinearBatch(T int, ps []nn.Product) bool {
	if T != 1 || b.err != nil {
		return false
	}
	var st *stack
	n := 0
	for _, p := range ps {
		if p.W == nil {
			continue
		}
		if st == nil {
			if st = b.stacks[p.W]; st == nil {
				return false
			}
		}
		if n >= len(st.list) || st.list[n] != p.W || p.X != ps[0].X {
			return false
		}
		n++
	}
	if st == nil || n != len(st.list) {
		return false
	}
	x := g(ps[0].X)
	off := 0
	for _, f := range st.parts {
		b.fail(b.d.Linear(b.proj.At(off), x.v, 1, f))
		off += f.Rows
	}
	off = 0
	for i, p := range ps {
		if p.W != nil {
			ps[i].Out = b.view(gt{v: b.proj.At(off), cols: p.W.Rows, stride: p.W.Rows})
			off += p.W.Rows
		}
	}
	return true
}

func (b *gpu) LinearAccum(out, x nn.Tensor, T int, W *tensor.Mat) bool {
	if b.err == nil {
		o, s := g(out), g(x)
		b.fail(b.d.LinearAccum(o.v, o.stride, s.v, s.stride, T, b.mat(W)))
	}
	return true
}

// prepLayout is the device layout of a decoded token's KDAPrep operands
// when its kernels take them: q, k, v, β stacked projections, the conv
// weights and tails contiguous, the outputs row blocks of one tensor
// (step words apart).
func (b *gpu) prepLayout(a *nn.ConvArgs) (x, beta, w, tails View, tail, step int, ok bool) {
	if a.T != 1 || b.err != nil {
		return
	}
	hd := a.H * a.DK
	q, k, v := g(a.Q), g(a.K), g(a.V)
	qc, kc, vc := g(a.QC), g(a.KC), g(a.VC)
	wq, wk, wv := b.vec(a.WQ), b.vec(a.WK), b.vec(a.WV)
	tq, tk, tv := g(a.TailQ), g(a.TailK), g(a.TailV)
	cw, tail, step := hd*a.Kernel, (a.Kernel-1)*hd, kc.v.Off-qc.v.Off
	if k.v != (View{q.v.Buf, q.v.Off + hd}) || v.v != (View{q.v.Buf, q.v.Off + 2*hd}) || g(a.Beta).v.Buf != q.v.Buf ||
		wk != (View{wq.Buf, wq.Off + cw}) || wv != (View{wq.Buf, wq.Off + 2*cw}) ||
		tk.v != (View{tq.v.Buf, tq.v.Off + tail}) || tv.v != (View{tq.v.Buf, tq.v.Off + 2*tail}) ||
		kc.v.Buf != qc.v.Buf || vc.v != (View{qc.v.Buf, qc.v.Off + 2*step}) || step < hd {
		return
	}
	return q.v, g(a.Beta).v, wq, tq.v, tail, step, true
}

// KDAPrep runs a decoded token's conv, L2 norms and σ(β) in one dispatch
// when its operands have prepLayout.
func (b *gpu) KDAPrep(a *nn.ConvArgs) bool {
	x, beta, w, tails, tail, step, ok := b.prepLayout(a)
	if !ok {
		return false
	}
	var gate *KDAPrepGate
	if ga := a.Gate; ga != nil { // the gate in the same dispatch, when its operands allow
		b.gate = KDAPrepGate{G: g(ga.G).v, FA: g(ga.X).v, W: b.mat(ga.W), E: b.gateEpilogue(ga.Args)}
		if b.gate.check(x, a.H, a.DK) == nil {
			gate = &b.gate
		}
	}
	b.fail(b.d.KDAPrep(g(a.QC).v, step, x, beta, w, tails, tail, a.H, a.DK, a.Kernel, a.QScale, a.Eps, gate))
	if ga := a.Gate; ga != nil && gate == nil && b.err == nil {
		nn.LinearKDAGate(b, ga.G, ga.X, a.T, ga.W, ga.Args)
	}
	return true
}

// KDAStep runs a decoded token's KDAPrep (with its gate) and delta rule in
// one dispatch when the prep's operands have prepLayout, the delta rule
// reads what the prep writes and the kernel takes the shape (dv = dk ≤
// kdaStepDKMax, the gate's operands as KDAPrep's).
func (b *gpu) KDAStep(c *nn.ConvArgs, d *nn.DeltaArgs) bool {
	x, beta, w, tails, tail, _, ok := b.prepLayout(c)
	ga := c.Gate
	if !ok || ga == nil || d.T != 1 || d.H != c.H || d.DK != c.DK || d.DV != c.DK || c.DK > kdaStepDKMax ||
		g(d.Q).v != g(c.QC).v || g(d.K).v != g(c.KC).v || g(d.V).v != g(c.VC).v || g(d.G).v != g(ga.G).v || g(d.Beta).v != beta {
		return false
	}
	b.step = KDAStepArgs{H: c.H, DK: c.DK, K: c.Kernel, TailStep: tail, QScale: c.QScale, Eps: c.Eps, X: x, Beta: beta, Conv: w,
		Tails: tails, S: g(d.S).v, O: g(d.O).v,
		Gate: KDAPrepGate{G: g(ga.G).v, FA: g(ga.X).v, W: b.mat(ga.W), E: b.gateEpilogue(ga.Args)}}
	if b.step.check() != nil {
		return false
	}
	b.fail(b.d.KDAStep(&b.step))
	return true
}

func (b *gpu) LinearKDAGate(gv, x nn.Tensor, T int, W *tensor.Mat, a nn.KDAGateArgs) bool {
	if b.err != nil {
		return false
	}
	e := b.gateEpilogue(a)
	if e.DtBias.Buf == nil || e.DtBias.Buf != e.ALog.Buf {
		return false
	}
	b.fail(b.d.LinearKDAGate(g(gv).v, g(x).v, T, b.mat(W), e))
	return true
}

// LinearGatedNorm: a decoded token's gated norm inside its output
// projection's GEMV.
func (b *gpu) LinearGatedNorm(out nn.Tensor, accum bool, x, gate nn.Tensor, T int, W *tensor.Mat, nu []float32, eps float32, act ref.GateAct) bool {
	if T != 1 || g(x).cols > maxGatedNormCols || b.err != nil {
		return false
	}
	b.fail(b.d.LinearGatedNorm(g(out).v, accum, g(x).v, g(gate).v, b.mat(W), b.vec(nu), len(nu), eps, act))
	return true
}

// LinearNormed: a decoded token's RMSNorm inside the projection's GEMV.
func (b *gpu) LinearNormed(out nn.Tensor, accum bool, x nn.Tensor, T int, W *tensor.Mat, nu []float32, eps float32) bool {
	if T != 1 || b.err != nil || g(out).v.Buf == g(x).v.Buf {
		return false
	}
	b.fail(b.d.LinearNormed(g(out).v, accum, g(x).v, b.mat(W), b.vec(nu), eps))
	return true
}

// LinearGated: a decoded token's output gate inside the projection's GEMV.
func (b *gpu) LinearGated(out nn.Tensor, accum bool, x, gate nn.Tensor, T int, W *tensor.Mat) bool {
	o, xv, gv := g(out).v, g(x).v, g(gate).v
	if T != 1 || g(x).cols > maxGatedNormCols || b.err != nil || o.Buf == xv.Buf || o.Buf == gv.Buf {
		return false
	}
	b.fail(b.d.LinearGated(o, accum, xv, gv, b.mat(W)))
	return true
}

// LinearGLU: a decoded token's GLU activation inside the down
// projection's GEMV.
func (b *gpu) LinearGLU(out nn.Tensor, accum bool, gate, up nn.Tensor, T int, W *tensor.Mat, act ref.Act) bool {
	o, gv, uv := g(out).v, g(gate).v, g(up).v
	if T != 1 || g(up).cols > maxGatedNormCols || b.err != nil || o.Buf == gv.Buf || o.Buf == uv.Buf {
		return false
	}
	b.fail(b.d.LinearGLU(o, accum, gv, uv, b.mat(W), act))
	return true
}

// LinearNormedGLU: a decoded token's two projections into one output in
// one GEMV, when their matrices were declared together (one buffer).
func (b *gpu) LinearNormedGLU(out nn.Tensor, accum bool, x nn.Tensor, T int, W *tensor.Mat, nu []float32, eps float32, gate, up nn.Tensor, W2 *tensor.Mat, act ref.Act) bool {
	if T != 1 || b.err != nil {
		return false
	}
	o, xv, gv, uv := g(out).v, g(x).v, g(gate).v, g(up).v
	w1, w2 := b.mat(W), b.mat(W2)
	if w1 == nil || w2 == nil || w1.Buf != w2.Buf || w1.DType != w2.DType || w1.Rows != w2.Rows || len(w1.Parts)+len(w2.Parts) > 0 ||
		W.Cols+W2.Cols > maxGatedNormCols || gv.Buf != uv.Buf || o.Buf == xv.Buf || o.Buf == gv.Buf {
		return false
	}
	b.fail(b.d.LinearNormedGLU(o, accum, xv, w1, b.vec(nu), eps, gv, uv, w2, act))
	return true
}

func (b *gpu) AttnResNorm(out nn.Tensor, srcs []nn.Tensor, T int, w, gamma []float32, eps float32, norm []float32, normEps float32) bool {
	if b.err != nil {
		return false
	}
	src, ok := b.slots(srcs)
	if !ok {
		return false
	}
	o, s0 := g(out), g(srcs[0])
	if T == 1 { // computed by the GEMV that reads it, where it can be
		b.fail(b.d.DeferAttnResNorm(o.v, src, len(srcs), s0.cols, b.vec(w), b.vec(gamma), eps, b.vec(norm), normEps))
		return true
	}
	b.fail(b.d.AttnResNorm(o.s(), src, s0.stride, len(srcs), s0.cols, T, b.vec(w), b.vec(gamma), eps, b.vec(norm), normEps))
	return true
}

// EndLayer submits a multi-token piece's layer as its own command buffer,
// so no submission of a long prefill approaches the 5 s wait limit of the
// binding (bug 5); decoding keeps one command buffer per token.
func (b *gpu) EndLayer(T int) {
	if T > 1 && b.err == nil {
		b.fail(b.d.Flush())
	}
}
