//go:build cgo || js

package wgsl

import (
	"errors"
	"fmt"
	"math"
	"math/bits"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// maxBindingWords is the WebGPU default maxStorageBufferBindingSize
// (128 MiB) in words: every storage binding covers its whole buffer, so no
// buffer may be larger.
const maxBindingWords = 128 << 20 / 4

// Embed records the embedding gather out[t] = table[ids[t]] (tensor.Mat.Row)
// for T token ids held as u32 in ids; out rows are out.Stride words apart
// (e.g. straight into an AttnRes block slot). The table keeps its dtype on
// the GPU. Ids outside [0, table.Rows) give zero rows: validate on the host.
func (d *Device) Embed(out Strided, table *Mat, ids View, T int) error {
	if T <= 0 {
		return fmt.Errorf("wgsl: Embed: %d tokens", T)
	}
	if table != nil && len(table.Parts) > 0 {
		// each part gathers the ids in its row range; the first also
		// writes the zero rows of ids outside the table
		r0 := 0
		for _, p := range table.Parts {
			if err := d.embed(out, p, ids, T, r0, table.Rows); err != nil {
				return err
			}
			r0 += p.Rows
		}
		return nil
	}
	return d.embed(out, table, ids, T, 0, 0)
}

// embed gathers the ids in [row0, row0+table.Rows) from table, a part of a
// matrix of total rows (0: table is whole).
func (d *Device) embed(out Strided, table *Mat, ids View, T, row0, total int) error {
	if err := table.check("Embed table"); err != nil {
		return err
	}
	if err := ids.check(T, "Embed ids"); err != nil {
		return err
	}
	n := table.Cols
	if err := out.check(T, n, "Embed out"); err != nil {
		return err
	}
	k, err := d.kernel("embed.wgsl", "main", 3)
	if err != nil {
		return err
	}
	p := params{}.u(n, T, int(table.DType), table.Rows, table.Off, table.Stride, ids.Off, out.Off, out.Stride, row0, total)
	return d.dispatch(k, p, []*Buffer{table.Buf, ids.Buf, out.Buf}, (T*n+255)/256)
}

// Argmax records out[0] = the index (u32) of the largest of the n floats
// at x, the first on ties (generate.Argmax), so greedy decoding reads back
// one word per token.
func (d *Device) Argmax(out, x View, n int) error {
	if n <= 0 {
		return fmt.Errorf("wgsl: Argmax of %d values", n)
	}
	if err := x.check(n, "Argmax x"); err != nil {
		return err
	}
	if err := out.check(1, "Argmax out"); err != nil {
		return err
	}
	if n/256 > loopBudget {
		return fmt.Errorf("wgsl: Argmax: %d values exceed the per-invocation loop budget", n)
	}
	k, err := d.kernel("argmax.wgsl", "main", 2)
	if err != nil {
		return err
	}
	return d.dispatch(k, params{}.u(n, x.Off, out.Off), []*Buffer{x.Buf, out.Buf}, 1)
}

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
	kern := func(entry string) (*kernel, error) { return d.kernel("moe_grouped.wgsl", entry, 6) }
	pr := func(rows, cols, st, eWords, xOff, xStride, oOff, oStride int) params {
		return params{}.u(rows, cols, T, K, w.E, int(w.DType), 0, st, eWords, xOff, xStride, oOff, oStride,
			r.Idx.Off, r.Wts.Off, sc.Ord.Off, mode).f(act.Beta, act.BetaLin).u(b2i(accum))
	}
	steps := []struct {
		entry  string
		p      params
		bufs   []*Buffer
		groups int
	}{
		{"group", pr(0, 0, 0, 0, 0, 0, 0, 0), []*Buffer{w.GateUp, x.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, sc.H.Buf}, 1},
		{"gateup", pr(w.I, w.In, matStride(w.In, w.DType), 2*w.I*matStride(w.In, w.DType), x.Off, x.Stride, sc.H.Off, w.I),
			[]*Buffer{w.GateUp, x.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, sc.H.Buf}, (w.I + 7) / 8 * w.E},
		{"down", pr(w.Out, w.I, matStride(w.I, w.DType), w.Out*matStride(w.I, w.DType), sc.H.Off, w.I, sc.Y.Off, w.Out),
			[]*Buffer{w.Down, sc.H.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, sc.Y.Buf}, (w.Out + 7) / 8 * w.E},
		{"combine", pr(w.Out, 0, 0, 0, sc.Y.Off, w.Out, out.Off, out.Stride),
			[]*Buffer{w.Down, sc.Y.Buf, r.Idx.Buf, r.Wts.Buf, sc.Ord.Buf, out.Buf}, (T*w.Out + 255) / 256},
	}
	for _, st := range steps {
		k, err := kern(st.entry)
		if err != nil {
			return err
		}
		if err := d.dispatch(k, st.p, st.bufs, st.groups); err != nil {
			return err
		}
	}
	return nil
}

// SampleParams are the settings of one draw on the GPU: those of
// generate.SamplerOptions the kernel implements, and the sampler's uniform
// draw U in [0, 1) (generate.Sampler.Draw), so a seeded session picks the
// same tokens on the GPU as on the CPU.
type SampleParams struct {
	Temperature float32 // > 0 (0 is greedy: use Argmax)
	TopK        int     // 0: all
	TopP, MinP  float32 // 0 (or TopP 1): off
	U           float64
}

// samplePasses bounds the passes of sample.wgsl over the logits (each
// invocation loops ⌈n/256⌉ times per pass): reductions, the top-k radix
// select, and up to three order searches of 32 + log2 n passes.
func samplePasses(n int) int {
	idbits := max(1, bits.Len(uint(n-1)))
	return 84 + 3*idbits
}

// SampleOnGPU reports whether Sample can draw from n logits within the
// per-invocation loop budget (about 60 K logits; larger vocabularies are
// sampled on the host).
func SampleOnGPU(n int) bool {
	return n > 0 && (n+255)/256*samplePasses(n) <= loopBudget
}

// Sample records out[0] = the token generate.Sampler (without repetition
// penalty) picks from the n logits at x for the draw o.U: temperature,
// top-k (ties to the lowest ids), min-p, top-p and the draw over the
// kept tokens in (logit desc, id asc) order, in one workgroup, without
// sorting (sample.wgsl). scratch holds n words of weights. Sums run in
// f32 on the GPU and in f64 on the host, so a draw within ~1e-6 of a
// boundary between two tokens may pick the neighbour.
func (d *Device) Sample(out, x, scratch View, n int, o SampleParams) error {
	switch {
	case n <= 0:
		return fmt.Errorf("wgsl: Sample of %d values", n)
	case !SampleOnGPU(n):
		return fmt.Errorf("wgsl: Sample: %d values exceed the per-invocation loop budget", n)
	case !(o.Temperature > 0) || math.IsInf(float64(o.Temperature), 0):
		return fmt.Errorf("wgsl: Sample: temperature %g (want > 0; use Argmax for greedy)", o.Temperature)
	case o.TopK < 0 || o.TopP < 0 || o.TopP > 1 || o.MinP < 0 || o.MinP > 1 || o.U < 0 || o.U >= 1:
		return fmt.Errorf("wgsl: Sample: top-k %d, top-p %g, min-p %g, draw %g out of range", o.TopK, o.TopP, o.MinP, o.U)
	}
	if err := x.check(n, "Sample x"); err != nil {
		return err
	}
	if err := scratch.check(n, "Sample scratch"); err != nil {
		return err
	}
	if err := out.check(1, "Sample out"); err != nil {
		return err
	}
	k, err := d.kernel("sample.wgsl", "main", 3)
	if err != nil {
		return err
	}
	p := params{}.u(n, x.Off, out.Off, scratch.Off, o.TopK).f(o.Temperature, o.TopP, o.MinP, float32(o.U))
	return d.dispatch(k, p, []*Buffer{x.Buf, out.Buf, scratch.Buf}, 1)
}

// SigmoidGate records out = σ(g) ⊙ y over rows×n elements (the MLA output
// gate: o ⊙ σ(g_proj x)). out may equal y.
func (d *Device) SigmoidGate(out, g, y Strided, rows, n int) error {
	return d.elementwise("glu", out, g, y, rows, n, 2, 0, 0, 0)
}

// Sigmoid records out = σ(x) over rows×n elements (KDA β). out may equal x.
func (d *Device) Sigmoid(out, x Strided, rows, n int) error {
	return d.elementwise("glu", out, x, x, rows, n, 3, 0, 0, 0)
}

// RMSNormRows is RMSNorm over rows with explicit row strides for x and out
// (e.g. normalising the c_kv part of latent-cache rows in place).
func (d *Device) RMSNormRows(out, x Strided, w View, rows, n int, eps float32) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: RMSNormRows: %d rows of %d", rows, n)
	}
	if err := x.check(rows, n, "RMSNormRows x"); err != nil {
		return err
	}
	if err := out.check(rows, n, "RMSNormRows out"); err != nil {
		return err
	}
	if err := w.check(n, "RMSNormRows w"); err != nil {
		return err
	}
	k, err := d.kernel("norm.wgsl", "rmsnorm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, 0).f(eps, 1).u(x.Off, x.Stride, x.Off, x.Stride, w.Off, out.Off, out.Stride)
	return d.dispatch(k, p, []*Buffer{x.Buf, nil, w.Buf, out.Buf}, rows) // mode 0 reads no g
}

// GLUWeights are E GLU blocks (routed experts, or one dense MLP / shared
// expert block with E = 1) on the GPU: GateUp holds per expert the gate
// rows then the up rows ([2·I, In]), Down per expert [Out, I]. All
// matrices share one dtype.
type GLUWeights struct {
	GateUp, Down *Buffer
	E, I, In     int
	Out          int
	DType        tensor.DType
}

// UploadGLU packs E GLU blocks (gate[e], up[e] [I, In], down[e] [Out, I])
// into two buffers. Each buffer must fit one storage binding (128 MiB);
// larger expert sets must be split by the caller.
func (d *Device) UploadGLU(gate, up, down []*tensor.Mat) (*GLUWeights, error) {
	E := len(gate)
	if E == 0 || len(up) != E || len(down) != E {
		return nil, fmt.Errorf("wgsl: UploadGLU: %d gate, %d up, %d down matrices", len(gate), len(up), len(down))
	}
	widen := func(ms []*tensor.Mat) []*tensor.Mat {
		out := make([]*tensor.Mat, len(ms))
		for i, m := range ms {
			out[i] = gpuWeights(m)
		}
		return out
	}
	gate, up, down = widen(gate), widen(up), widen(down)
	g0 := gate[0]
	if g0 == nil || down[0] == nil {
		return nil, fmt.Errorf("wgsl: UploadGLU: nil matrix")
	}
	w := &GLUWeights{E: E, I: g0.Rows, In: g0.Cols, Out: down[0].Rows, DType: g0.DType}
	if w.DType > tensor.BF16 {
		return nil, fmt.Errorf("wgsl: UploadGLU: unsupported dtype %v", w.DType)
	}
	for e := 0; e < E; e++ {
		for _, m := range []*tensor.Mat{gate[e], up[e], down[e]} {
			if m == nil || m.DType != w.DType {
				return nil, fmt.Errorf("wgsl: UploadGLU: expert %d: missing matrix or mixed dtypes", e)
			}
		}
		if gate[e].Rows != w.I || gate[e].Cols != w.In || up[e].Rows != w.I || up[e].Cols != w.In ||
			down[e].Rows != w.Out || down[e].Cols != w.I {
			return nil, fmt.Errorf("wgsl: UploadGLU: expert %d: shapes %dx%d, %dx%d, %dx%d differ from expert 0",
				e, gate[e].Rows, gate[e].Cols, up[e].Rows, up[e].Cols, down[e].Rows, down[e].Cols)
		}
	}
	gu := make([]uint32, 0, E*2*MatWords(w.I, w.In, w.DType))
	dn := make([]uint32, 0, E*MatWords(w.Out, w.I, w.DType))
	for e := 0; e < E; e++ {
		gu = append(gu, PackMat(gate[e])...)
		gu = append(gu, PackMat(up[e])...)
		dn = append(dn, PackMat(down[e])...)
	}
	if len(gu) > maxBindingWords || len(dn) > maxBindingWords {
		return nil, fmt.Errorf("wgsl: UploadGLU: %d experts of %dx%d take more than one 128 MiB binding", E, w.I, w.In)
	}
	var err error
	if w.GateUp, err = d.UploadU32(gu); err != nil {
		return nil, fmt.Errorf("wgsl: UploadGLU gate/up: %w", err)
	}
	if w.Down, err = d.UploadU32(dn); err != nil {
		w.GateUp.Release()
		return nil, fmt.Errorf("wgsl: UploadGLU down: %w", err)
	}
	return w, nil
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
	if err := r.Idx.check(T*r.K, what+" idx"); err != nil {
		return false, err
	}
	return true, r.Wts.check(T*r.K, what+" weights")
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
	if (w.In+1)/2/8 > loopBudget/2 {
		return fmt.Errorf("wgsl: GLUGateUp: %d columns exceed the per-invocation loop budget", w.In)
	}
	k, err := d.kernel("moe.wgsl", "gateup", 5)
	if err != nil {
		return err
	}
	st := matStride(w.In, w.DType)
	idx, wts := r.Idx, r.Wts // zero Views (placeholder bindings) for a dense block
	p := params{}.u(w.I, w.In, T, r.K, int(w.DType), 0, st, 2*w.I*st, x.Off, x.Stride, h.Off, w.I,
		idx.Off, wts.Off, b2i(useIdx), mode).f(act.Beta, act.BetaLin).u(0)
	return d.dispatch(k, p, []*Buffer{w.GateUp, x.Buf, idx.Buf, wts.Buf, h.Buf}, (w.I+7)/8*T*r.K)
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
	if r.K*((w.I+1)/2/8+1) > loopBudget {
		return fmt.Errorf("wgsl: GLUDown: %d experts of %d columns exceed the per-invocation loop budget", r.K, w.I)
	}
	k, err := d.kernel("moe.wgsl", "down", 5)
	if err != nil {
		return err
	}
	st := matStride(w.I, w.DType)
	idx, wts := r.Idx, r.Wts // zero Views (placeholder bindings) for a dense block
	p := params{}.u(w.Out, w.I, T, r.K, int(w.DType), 0, st, w.Out*st, h.Off, w.I, out.Off, out.Stride,
		idx.Off, wts.Off, b2i(useIdx), 0).f(0, 0).u(b2i(accum))
	return d.dispatch(k, p, []*Buffer{w.Down, h.Buf, idx.Buf, wts.Buf, out.Buf}, (w.Out+7)/8*T)
}
