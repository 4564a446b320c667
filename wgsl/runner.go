//go:build cgo || js

package wgsl

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// RunnerOptions size a GPU Runner.
type RunnerOptions struct {
	// MaxChunk is the largest number of tokens one Forward call processes
	// (activation buffers are sized for it). Default 64.
	MaxChunk int
	// MaxContext is the longest sequence the runner holds (MLA latent
	// caches and attention scratch are allocated for it up front; the
	// caches are paged, so no binding limit caps it: 1 M tokens work).
	// Default: the model's context, capped at 4096.
	MaxContext int
	// CachePageRows is the page size of the MLA latent caches in rows (a
	// multiple of 128); 0 chooses DefaultPageRows (pages of at most
	// MaxCachePageBytes). Tests set small pages to cross page edges.
	CachePageRows int
	// MemoryBudget, when > 0, is the GPU memory the runner may use:
	// NewRunner refuses a model whose estimate exceeds it (WebGPU does not
	// tell how much memory a device has).
	MemoryBudget int64
}

// RunnerStats describes the last Forward or Greedy call.
type RunnerStats struct {
	Tokens     int // tokens processed
	Dispatches int // compute dispatches recorded
	Submits    int // command buffers submitted (1 unless a step overflowed the uniform arena)
}

// Runner evaluates a model.Model entirely on the GPU: all weights are
// uploaded once, all activations, KDA states, conv tails and MLA latent
// caches live in GPU buffers allocated by NewRunner, and a Forward call
// records a decode step into one command buffer (a multi-token piece is
// submitted layer by layer). Nothing is created per token. The Runner holds the state of one sequence (it mirrors
// model.Runner plus model.State). It is not safe for concurrent use.
//
// KDA prefill runs the recurrent kernel over the piece (one dispatch per
// ≤ loopBudget/(2·dk+2) tokens per layer), not the chunked WY/UT form:
// the recurrence touches each state element once per token, as the
// chunked form does, and at MaxChunk ≤ 64 the chunked form's extra
// intra-chunk GEMMs do not pay off; prefill cost is O(T·H·dk·dv) per
// layer either way. Routed MoE experts of a decode step run per (token,
// slot) with the ids the GPU router wrote; a prefill piece groups its
// slots by expert on the GPU (GLUGrouped), reading each selected expert's
// weights once per 8 of its tokens instead of once per token.
type Runner struct {
	d   *Device
	cfg *config.Config
	opt RunnerOptions
	pos int

	bufs []*Buffer
	// longWait: this runner's steps may take seconds (MaxContext ≥
	// longWaitContext), so the device waits by polling (bug 5).
	longWait bool

	embed, lmHead *Mat
	norm          View
	outProj       View
	outNorm       View
	layers        []gpuLayer

	// activations
	tok                           *Buffer
	tokHost                       []uint32
	embIn                         *Buffer // [MaxChunk, d] input embeddings (ForwardEmbeddings)
	fromEmb                       bool    // the piece being recorded starts from embIn
	h, slots                      *Buffer // residual stream or AttnRes block slots
	nslots                        int
	xn                            *Buffer
	q, k, v, qkvc, g, gate, o     *Buffer
	beta, fa, qa, kva             *Buffer
	lat, racc, elog, idx, wts, hb *Buffer
	logits, outTok                *Buffer
	weights                       *Buffer // [V] sampling scratch
	proj                          *Buffer // one token's fused input projections
	gord, gy                      *Buffer // grouped experts: slot order, weighted outputs

	zeros []float32
	last  RunnerStats
}

type gpuLayer struct {
	kind                               config.LayerKind
	in, post                           View
	kda                                *gpuKDA
	mla                                *gpuMLA
	mlp                                *GLUWeights
	moe                                *gpuMoE
	resProj, resNorm, mlpProj, mlpNorm View
}

// The mixers' and MoE's projections of the same normed input are stacked
// in one matrix (in, nil when they could not be: see loader.fuse), and
// qp, kp, ... are views of its rows: one GEMV per decoded token computes
// them all, multi-token pieces use the views.
type gpuKDA struct {
	in                                  *Mat
	qp, kp, vp, fa, fb, b, g, ga, gb, o *Mat
	qconv, kconv, vconv                 View // views of conv: [q k v][H·dk][K]
	dtBias, aLog, oNorm                 View
	perChannel                          bool
	state                               *Buffer // S [H, dk, dv] then conv tails Q, K, V [K−1, H·dk]
	S, convQ, convK, convV              View
}

type gpuMLA struct {
	in                        *Mat
	q, qa, qb, kva, kvb, g, o *Mat
	qaNorm, kvaNorm           View
	cache                     *LatentCache
}

type gpuMoE struct {
	in                *Mat
	gate              *Mat
	bias              View
	experts, shared   *GLUWeights
	downProj, upProj  *Mat
	norm              View
	hasNorm, hasUpDwn bool
}

// NewRunner uploads m's weights to d and allocates every buffer the
// runner will use. The caller keeps ownership of d (close the Runner
// before the Device). When the estimate of the memory it needs
// (EstimateMemory) exceeds opt.MemoryBudget, or the device runs out while
// it uploads, the error is a *MemoryError.
func NewRunner(d *Device, m *model.Model, opt RunnerOptions) (*Runner, error) {
	if d == nil || m == nil || m.Cfg == nil {
		return nil, fmt.Errorf("wgsl: NewRunner: nil device or model")
	}
	if m.Family != nil {
		return nil, fmt.Errorf("wgsl: the %s family has no WebGPU kernels yet (its GDN, RoPE and grouped-query attention ops run on the CPU backend: --backend cpu)", m.Cfg.Layout)
	}
	opt = opt.withDefaults(m.Cfg)
	need := EstimateMemory(m, opt)
	if opt.MemoryBudget > 0 && need.Total() > opt.MemoryBudget {
		return nil, &MemoryError{Need: need, Budget: opt.MemoryBudget, MaxContext: opt.MaxContext}
	}
	r := &Runner{d: d, cfg: m.Cfg, opt: opt}
	if opt.MaxContext >= longWaitContext {
		r.longWait = true
		d.longWaits++
	}
	if err := r.load(m); err != nil {
		got := r.Bytes()
		r.Close()
		if isOutOfMemory(err) {
			return nil, &MemoryError{Need: need, Allocated: got, MaxContext: opt.MaxContext, Err: err}
		}
		return nil, err
	}
	return r, nil
}

// longWaitContext is the context from which a runner makes its device wait
// for submissions by polling: one decode step over the caches of 128 K
// tokens and more can approach the binding's 5 s blocking-wait limit on a
// CPU driver.
const longWaitContext = 1 << 17

func (o RunnerOptions) withDefaults(c *config.Config) RunnerOptions {
	if o.MaxChunk <= 0 {
		o.MaxChunk = 64
	}
	if o.MaxContext <= 0 {
		o.MaxContext = min(c.MaxPositions, 4096)
	}
	if c.MaxPositions > 0 {
		o.MaxContext = min(o.MaxContext, c.MaxPositions)
	}
	return o
}

// Memory is what a Runner holds on the GPU, in bytes.
type Memory struct {
	Weights int64 // matrices (f32, or f16/bf16: q8 is widened to f16) and vectors (f32)
	State   int64 // KDA states and conv tails, MLA latent caches for MaxContext tokens
	Scratch int64 // activations for MaxChunk tokens, attention and sampling scratch
}

// Total is the sum of the parts.
func (m Memory) Total() int64 { return m.Weights + m.State + m.Scratch }

// EstimateMemory estimates the GPU memory a Runner for m with opt needs
// (the weights exactly up to vectors' rounding; scratch to within a few
// percent), from shapes alone: it reads no weight data.
func EstimateMemory(m *model.Model, opt RunnerOptions) Memory {
	c := m.Cfg
	opt = opt.withDefaults(c)
	st := model.ComputeStats(c)
	per := int64(2)
	if m.EmbedTokens != nil && m.EmbedTokens.DType == tensor.F32 {
		per = 4
	}
	text := st.TotalParams - st.VisionParams
	if c.TieWordEmbed {
		text -= int64(c.VocabSize) * int64(c.HiddenSize) // one buffer serves both
	}
	T, d, V := int64(opt.MaxChunk), int64(c.HiddenSize), int64(c.VocabSize)
	hd := int64(max(c.KDAHeads*c.KDAHeadDim, c.NumHeads*(c.QKNopeHeadDim+c.QKRopeHeadDim), c.NumHeads*c.VHeadDim, 1))
	inter := int64(max(c.IntermediateSize, c.TopK*c.MoEIntermediateSize, 1))
	scratch := 4 * (T*(12*d+12*hd+2*inter+V) + 2*V + int64(c.NumHeads)*int64(opt.MaxContext))
	if c.NumExperts > 0 { // grouped-expert order and outputs
		K, E := int64(c.TopK), int64(c.NumExperts)
		scratch += 4 * (E + 1 + T*K + T*K*int64(max(c.HiddenSize, c.ExpertWidth())))
	}
	return Memory{
		Weights: text * per,
		State:   st.KDAStateBytes + st.CacheBytesPerTok*int64(opt.MaxContext),
		Scratch: scratch,
	}
}

// Bytes is the GPU memory the runner's buffers take.
func (r *Runner) Bytes() int64 {
	var n int64
	for _, b := range r.bufs {
		n += 4 * int64(b.Words())
	}
	return n
}

// StateBytes is the GPU memory of the sequence state: KDA states and conv
// tails plus the MLA latent caches' pages (allocated for MaxContext).
func (r *Runner) StateBytes() int64 {
	var n int64
	for _, l := range r.layers {
		if l.kda != nil {
			n += 4 * int64(l.kda.state.Words())
		}
		if l.mla != nil {
			n += l.mla.cache.Bytes()
		}
	}
	return n
}

// FillContext makes the sequence L tokens long without running them: every
// MLA latent cache gets L rows from row (row(layer, i, dst) fills row i of
// the cache of layer layer), uploaded in blocks, and the position becomes L;
// KDA states are left as they are. Benchmarks use it to decode at long
// contexts whose prefill would take hours (decode reads the cache the same
// way whatever filled it). It starts from Reset.
func (r *Runner) FillContext(L int, row func(layer, i int, dst []float32)) error {
	if L < 0 || L > r.opt.MaxContext {
		return fmt.Errorf("wgsl: FillContext(%d): the runner holds %d tokens", L, r.opt.MaxContext)
	}
	if err := r.Reset(); err != nil {
		return err
	}
	for li, l := range r.layers {
		if l.mla == nil {
			continue
		}
		c := l.mla.cache
		const block = 1 << 14
		buf := make([]float32, min(L, block)*c.Width)
		for i0 := 0; i0 < L; i0 += block {
			n := min(block, L-i0)
			for i := 0; i < n; i++ {
				row(li, i0+i, buf[i*c.Width:(i+1)*c.Width])
			}
			if err := c.AppendHost(buf[:n*c.Width]); err != nil {
				return fmt.Errorf("wgsl: FillContext: layer %d: %w", li, err)
			}
		}
	}
	r.pos = L
	return r.d.Sync()
}

// MemoryError says a model does not fit the GPU: what it needs, and the
// budget it was checked against or what was allocated when the device ran
// out of memory.
type MemoryError struct {
	Need       Memory
	Budget     int64 // the budget exceeded (0: the device ran out)
	Allocated  int64 // bytes allocated when the device ran out
	MaxContext int
	Err        error // the device's out-of-memory error
}

func (e *MemoryError) Error() string {
	need := fmt.Sprintf("the model needs about %s of GPU memory (weights %s, state and caches for %d tokens %s, scratch %s)",
		mib(e.Need.Total()), mib(e.Need.Weights), e.MaxContext, mib(e.Need.State), mib(e.Need.Scratch))
	const remedy = "use the CPU backend, a smaller model, or a shorter context"
	if e.Budget > 0 {
		return fmt.Sprintf("%s but %s is available; %s", need, mib(e.Budget), remedy)
	}
	return fmt.Sprintf("%s and the device ran out after %s (%v); %s", need, mib(e.Allocated), e.Err, remedy)
}

func (e *MemoryError) Unwrap() error { return e.Err }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// isOutOfMemory reports a device error that says it ran out of memory.
func isOutOfMemory(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "out of memory") || strings.Contains(s, "outofmemory") || strings.Contains(s, "out-of-memory")
}

// Close releases every buffer the runner created (not the Device).
func (r *Runner) Close() {
	if r == nil {
		return
	}
	_ = r.d.Sync()
	for _, b := range r.bufs {
		b.Release()
	}
	r.bufs = nil
	if r.longWait {
		r.d.longWaits--
		r.longWait = false
	}
}

// Device returns the device the runner runs on.
func (r *Runner) Device() *Device { return r.d }

// Pos is the number of tokens of the current sequence processed so far.
func (r *Runner) Pos() int { return r.pos }

// MaxChunk is the largest number of tokens one Forward call accepts.
func (r *Runner) MaxChunk() int { return r.opt.MaxChunk }

// MaxContext is the longest sequence the runner can hold.
func (r *Runner) MaxContext() int { return r.opt.MaxContext }

// Stats describes the last Forward or Greedy call; after a one-token
// Greedy call, Dispatches is the number of dispatches per decoded token.
func (r *Runner) Stats() RunnerStats { return r.last }

// Reset empties the sequence state (KDA states and conv tails zeroed,
// latent caches emptied) for a new sequence.
func (r *Runner) Reset() error {
	for _, l := range r.layers {
		if l.kda != nil {
			if err := l.kda.state.WriteF32(0, r.zeros[:l.kda.state.Words()]); err != nil {
				return fmt.Errorf("wgsl: runner reset: %w", err)
			}
		}
		if l.mla != nil {
			l.mla.cache.Len = 0
		}
	}
	r.pos = 0
	return nil
}

// groupExperts: prefill pieces run the routed experts grouped by expert
// (GLUGrouped); tests and benchmarks turn it off to compare.
var groupExperts = true

// ---- loading ----

func (r *Runner) buf(words int) (*Buffer, error) {
	if words > maxBindingWords {
		return nil, fmt.Errorf("wgsl: runner: buffer of %d words exceeds one 128 MiB binding", words)
	}
	b, err := r.d.NewBuffer(max(words, 1))
	if err != nil {
		return nil, err
	}
	r.bufs = append(r.bufs, b)
	return b, nil
}

func (r *Runner) vec(v []float32, name string) (View, error) {
	if len(v) == 0 {
		return View{}, fmt.Errorf("wgsl: runner: %s is empty", name)
	}
	b, err := r.d.UploadF32(v)
	if err != nil {
		return View{}, fmt.Errorf("wgsl: runner: upload %s: %w", name, err)
	}
	r.bufs = append(r.bufs, b)
	return b.At(0), nil
}

func (r *Runner) mat(m *tensor.Mat, name string) (*Mat, error) {
	if m == nil {
		return nil, nil
	}
	m, err := m.Resolve()
	if err != nil {
		return nil, fmt.Errorf("wgsl: runner: read %s: %w", name, err)
	}
	g, err := r.d.UploadMat(m)
	if err != nil {
		return nil, fmt.Errorf("wgsl: runner: upload %s: %w", name, err)
	}
	r.bufs = append(r.bufs, g.Buffers()...)
	return g, nil
}

func (r *Runner) glu(w *model.MLP, name string) (*GLUWeights, error) {
	return r.glus([]model.MLP{*w}, name)
}

func (r *Runner) glus(ws []model.MLP, name string) (*GLUWeights, error) {
	// one layer's experts are resolved together (deferred models): they
	// are packed into one buffer
	var g, u, dn []*tensor.Mat
	for i, w := range ws {
		for _, p := range []struct {
			dst  *[]*tensor.Mat
			m    *tensor.Mat
			what string
		}{{&g, w.GateProj, "gate_proj"}, {&u, w.UpProj, "up_proj"}, {&dn, w.DownProj, "down_proj"}} {
			m, err := p.m.Resolve()
			if err != nil {
				return nil, fmt.Errorf("wgsl: runner: read %s.%d.%s: %w", name, i, p.what, err)
			}
			*p.dst = append(*p.dst, m)
		}
	}
	gw, err := r.d.UploadGLU(g, u, dn)
	if err != nil {
		return nil, fmt.Errorf("wgsl: runner: %s: %w", name, err)
	}
	r.bufs = append(r.bufs, gw.GateUp, gw.Down)
	return gw, nil
}

// loader accumulates the first error of a sequence of uploads.
type loader struct {
	r   *Runner
	err error
}

func (l *loader) mat(m *tensor.Mat, name string) *Mat {
	if l.err != nil || m == nil {
		return nil
	}
	g, err := l.r.mat(m, name)
	l.err = err
	return g
}

// fuse uploads mats (the projections of one input; nil entries skipped)
// as one matrix of their rows stacked, and returns it with a view of each
// input's rows, so a decode step computes all their products in one GEMV
// while multi-token pieces still use each view. When the mats differ in
// dtype or width, or the stack would not fit one binding, each is uploaded
// on its own and the fused matrix is nil.
func (l *loader) fuse(names []string, mats ...*tensor.Mat) (*Mat, []*Mat) {
	views := make([]*Mat, len(mats))
	if l.err != nil {
		return nil, views
	}
	var ms []*tensor.Mat
	rows := 0
	for i, m := range mats {
		if m == nil {
			continue
		}
		m, err := m.Resolve()
		if err != nil {
			l.err = fmt.Errorf("wgsl: runner: read %s: %w", names[i], err)
			return nil, views
		}
		mats[i] = gpuWeights(m)
		ms = append(ms, mats[i])
		rows += m.Rows
	}
	ok := len(ms) > 1
	for _, m := range ms {
		ok = ok && m.DType == ms[0].DType && m.Cols == ms[0].Cols && m.DType <= tensor.BF16
	}
	if !ok || MatWords(rows, ms[0].Cols, ms[0].DType) > matPartWords {
		for i, m := range mats {
			views[i] = l.mat(m, names[i])
		}
		return nil, views
	}
	st := ms[0]
	var stack *tensor.Mat
	if st.DType == tensor.F32 {
		var data []float32
		for _, m := range ms {
			data = append(data, m.F32...)
		}
		stack = tensor.NewF32(rows, st.Cols, data)
	} else {
		var data []uint16
		for _, m := range ms {
			data = append(data, m.U16...)
		}
		stack = tensor.NewHalf(rows, st.Cols, st.DType, data)
	}
	f := l.mat(stack, strings.Join(names, "+"))
	if f == nil {
		return nil, views
	}
	r0 := 0
	for i, m := range mats {
		if m == nil {
			continue
		}
		views[i] = &Mat{View: View{f.Buf, f.Off + r0*f.Stride}, Rows: m.Rows, Cols: m.Cols, DType: f.DType, Stride: f.Stride}
		r0 += m.Rows
	}
	return f, views
}

func (l *loader) vec(v []float32, name string) View {
	if l.err != nil || v == nil {
		return View{}
	}
	g, err := l.r.vec(v, name)
	l.err = err
	return g
}

func (l *loader) buf(words int) *Buffer {
	if l.err != nil {
		return nil
	}
	b, err := l.r.buf(words)
	l.err = err
	return b
}

func (r *Runner) load(m *model.Model) error {
	c := r.cfg
	T, d := r.opt.MaxChunk, c.HiddenSize
	L := &loader{r: r}
	r.embed = L.mat(m.EmbedTokens, "embed_tokens")
	r.lmHead = L.mat(m.LMHead, "lm_head")
	r.norm = L.vec(m.Norm, "norm")
	if c.AttnResBlockSize > 0 {
		r.outProj = L.vec(m.OutputAttnResProj, "output_attn_res_proj")
		r.outNorm = L.vec(m.OutputAttnResNorm, "output_attn_res_norm")
	}
	if L.err != nil {
		return L.err
	}
	if r.embed == nil || r.lmHead == nil {
		return fmt.Errorf("wgsl: runner: model without embed_tokens or lm_head")
	}
	H, dk := c.KDAHeads, c.KDAHeadDim
	hdKDA := H * dk
	maxState := 0
	maxI := 1
	maxIn := 1           // rows of the largest fused input projection
	maxE, maxOut := 0, 0 // routed experts: count and output width (grouping scratch)
	for i, l := range m.Layers {
		p := fmt.Sprintf("layers.%d.", i)
		g := gpuLayer{kind: l.Kind, in: L.vec(l.InputLayernorm, p+"input_layernorm"),
			post: L.vec(l.PostAttentionLayernorm, p+"post_attention_layernorm")}
		if c.AttnResBlockSize > 0 {
			g.resProj = L.vec(l.SelfAttentionResProj, p+"self_attention_res_proj")
			g.resNorm = L.vec(l.SelfAttentionResNorm, p+"self_attention_res_norm")
			g.mlpProj = L.vec(l.MLPResProj, p+"mlp_res_proj")
			g.mlpNorm = L.vec(l.MLPResNorm, p+"mlp_res_norm")
		}
		switch {
		case l.KDA != nil:
			w := l.KDA
			in, v := L.fuse([]string{p + "q_proj", p + "k_proj", p + "v_proj", p + "b_proj", p + "f_a_proj", p + "g_proj", p + "g_a_proj"},
				w.QProj, w.KProj, w.VProj, w.BProj, w.FAProj, w.GProj, w.GAProj)
			k := &gpuKDA{in: in, qp: v[0], kp: v[1], vp: v[2], b: v[3], fa: v[4], g: v[5], ga: v[6],
				fb: L.mat(w.FBProj, p+"f_b_proj"), gb: L.mat(w.GBProj, p+"g_b_proj"),
				o: L.mat(w.OProj, p+"o_proj"), oNorm: L.vec(w.ONorm, p+"o_norm"), perChannel: len(w.ALog) == hdKDA && hdKDA != H}
			// dt_bias and A_log in one buffer: the f_b projection's gate
			// epilogue reads both through one binding
			if ga := L.vec(slices.Concat(w.DtBias, w.ALog), p+"dt_bias+A_log"); ga.Buf != nil {
				k.dtBias, k.aLog = ga, ga.Buf.At(ga.Off+len(w.DtBias))
			}
			if L.err == nil && (k.qp == nil || k.kp == nil || k.vp == nil || k.b == nil || k.fa == nil || k.fb == nil || k.o == nil ||
				(k.g == nil && (k.ga == nil || k.gb == nil))) {
				return fmt.Errorf("wgsl: runner: layer %d: incomplete KDA weights", i)
			}
			// the three conv weights in one buffer, for KDAPrep
			if cw := hdKDA * c.ConvKernel; len(w.QConv1d) != cw || len(w.KConv1d) != cw || len(w.VConv1d) != cw {
				return fmt.Errorf("wgsl: runner: layer %d: conv1d weights of %d, %d, %d values, want %d", i,
					len(w.QConv1d), len(w.KConv1d), len(w.VConv1d), cw)
			}
			k.qconv = L.vec(slices.Concat(w.QConv1d, w.KConv1d, w.VConv1d), p+"q_conv1d+k_conv1d+v_conv1d")
			if k.qconv.Buf != nil {
				k.kconv, k.vconv = k.qconv.Buf.At(k.qconv.Off+hdKDA*c.ConvKernel), k.qconv.Buf.At(k.qconv.Off+2*hdKDA*c.ConvKernel)
			}
			tail := (c.ConvKernel - 1) * hdKDA
			sw := H*dk*dk + 3*tail
			k.state = L.buf(sw)
			if k.state != nil {
				k.S, k.convQ = k.state.At(0), k.state.At(H*dk*dk)
				k.convK, k.convV = k.state.At(H*dk*dk+tail), k.state.At(H*dk*dk+2*tail)
			}
			maxState = max(maxState, sw)
			if in != nil {
				maxIn = max(maxIn, in.Rows)
			}
			g.kda = k
		case l.MLA != nil:
			w := l.MLA
			in, v := L.fuse([]string{p + "q_proj", p + "q_a_proj", p + "kv_a_proj_with_mqa", p + "g_proj"},
				w.QProj, w.QAProj, w.KVAProjWithMQA, w.GProj)
			if in != nil {
				maxIn = max(maxIn, in.Rows)
			}
			a := &gpuMLA{in: in, q: v[0], qa: v[1], kva: v[2], g: v[3], qb: L.mat(w.QBProj, p+"q_b_proj"),
				kvb: L.mat(w.KVBProj, p+"kv_b_proj"), o: L.mat(w.OProj, p+"o_proj"),
				qaNorm: L.vec(w.QALayernorm, p+"q_a_layernorm"), kvaNorm: L.vec(w.KVALayernorm, p+"kv_a_layernorm")}
			if L.err == nil {
				if a.kva == nil || a.kvb == nil || a.o == nil || (a.q == nil && (a.qa == nil || a.qb == nil)) {
					return fmt.Errorf("wgsl: runner: layer %d: incomplete MLA weights", i)
				}
				width := c.KVLoraRank + c.QKRopeHeadDim
				pageRows := r.opt.CachePageRows
				if pageRows == 0 {
					pageRows = DefaultPageRows(width, r.opt.MaxContext)
				}
				cache, err := r.d.NewPagedLatentCache(width, r.opt.MaxContext, pageRows)
				if err != nil {
					return fmt.Errorf("wgsl: runner: layer %d: %w", i, err)
				}
				r.bufs = append(r.bufs, cache.Pages...)
				a.cache = cache
			}
			g.mla = a
		default:
			return fmt.Errorf("wgsl: runner: layer %d has no mixer", i)
		}
		switch {
		case l.MLP != nil:
			if L.err == nil {
				gw, err := r.glu(l.MLP, p+"mlp")
				if err != nil {
					return err
				}
				g.mlp = gw
				maxI = max(maxI, gw.I)
			}
		case l.MoE != nil:
			w := l.MoE
			in, v := L.fuse([]string{p + "gate", p + "routed_expert_down_proj"}, w.Gate, w.RoutedExpertDownProj)
			if in != nil {
				maxIn = max(maxIn, in.Rows)
			}
			e := &gpuMoE{in: in, gate: v[0], bias: L.vec(w.EScoreCorrectionBias, p+"e_score_correction_bias"),
				downProj: v[1],
				upProj:   L.mat(w.RoutedExpertUpProj, p+"routed_expert_up_proj"),
				norm:     L.vec(w.RoutedExpertNorm, p+"routed_expert_norm")}
			e.hasNorm, e.hasUpDwn = w.RoutedExpertNorm != nil, w.RoutedExpertUpProj != nil
			if L.err == nil {
				if len(w.Experts) != c.NumExperts || e.gate == nil {
					return fmt.Errorf("wgsl: runner: layer %d: %d experts, want %d", i, len(w.Experts), c.NumExperts)
				}
				var err error
				if e.experts, err = r.glus(w.Experts, p+"experts"); err != nil {
					return err
				}
				maxI = max(maxI, c.TopK*e.experts.I)
				maxE, maxOut = max(maxE, e.experts.E), max(maxOut, e.experts.Out)
				if w.SharedExperts != nil {
					if e.shared, err = r.glu(w.SharedExperts, p+"shared_experts"); err != nil {
						return err
					}
					maxI = max(maxI, e.shared.I)
				}
			}
			g.moe = e
		default:
			return fmt.Errorf("wgsl: runner: layer %d has no FFN", i)
		}
		if L.err != nil {
			return L.err
		}
		r.layers = append(r.layers, g)
	}
	// Activations, sized for MaxChunk tokens.
	hd := max(hdKDA, c.NumHeads*(c.QKNopeHeadDim+c.QKRopeHeadDim), c.NumHeads*c.VHeadDim, 1)
	r.tok = L.buf(T)
	r.tokHost = make([]uint32, T)
	r.embIn = L.buf(T * d)
	if S := c.AttnResBlockSize; S > 0 {
		r.nslots = (c.NumHiddenLayers+S-1)/S + 1
		r.slots = L.buf(T * r.nslots * d)
	} else {
		r.h = L.buf(T * d)
	}
	r.xn = L.buf(T * d)
	r.qkvc = L.buf(3 * T * hd) // conv outputs q, k, v, T·hd words apart
	for _, p := range []**Buffer{&r.q, &r.k, &r.v, &r.g, &r.gate, &r.o} {
		*p = L.buf(T * hd)
	}
	r.beta = L.buf(T * max(H, 1))
	r.fa = L.buf(T * max(dk, 1))
	r.qa = L.buf(T * max(c.QLoraRank, 1))
	r.kva = L.buf(T * (c.KVLoraRank + c.QKRopeHeadDim))
	w := c.ExpertWidth()
	r.lat, r.racc = L.buf(T*w), L.buf(T*w)
	r.elog = L.buf(T * max(c.NumExperts, 1))
	r.idx, r.wts = L.buf(T*max(c.TopK, 1)), L.buf(T*max(c.TopK, 1))
	r.hb = L.buf(T * maxI)
	if maxE > 0 { // grouped routed experts for prefill pieces
		r.gord = L.buf(maxE + 1 + T*c.TopK)
		r.gy = L.buf(T * c.TopK * maxOut)
	}
	r.logits = L.buf(T * c.VocabSize)
	r.outTok = L.buf(1)
	r.proj = L.buf(maxIn)
	r.weights = L.buf(c.VocabSize)
	if L.err != nil {
		return L.err
	}
	r.zeros = make([]float32, maxState)
	// MLA attention scratch for the longest context, so decoding never
	// grows it (MLAAbsorbed for one query, MLANaive for a full chunk).
	if c.NumHeads > 0 && c.KVLoraRank > 0 {
		nh := c.NumHeads
		nsplit := (r.opt.MaxContext + mlaTile - 1) / mlaTile
		abs := nh*c.KVLoraRank + nh*nsplit*(c.KVLoraRank+2)
		naive := mlaTile*nh*(c.QKNopeHeadDim+c.VHeadDim) + 2*T*nh
		if _, err := r.d.scratchBuf("mla", max(abs, naive)); err != nil {
			return err
		}
	}
	return r.d.Sync()
}

// ---- forward ----

func (r *Runner) begin(tokens []int) error {
	c := r.cfg
	T := len(tokens)
	if err := r.checkPiece(T); err != nil {
		return err
	}
	for i, id := range tokens {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("wgsl: forward: token %d (index %d) is outside the vocabulary [0, %d)", id, i, c.VocabSize)
		}
		r.tokHost[i] = uint32(id)
	}
	if err := r.d.Flush(); err != nil {
		return err
	}
	if err := r.tok.WriteU32(0, r.tokHost[:T]); err != nil {
		return fmt.Errorf("wgsl: forward: upload tokens: %w", err)
	}
	return r.start(T, false)
}

// beginEmbeddings is begin for a piece given as input embeddings [T, d]:
// they are uploaded into embIn (allocated by NewRunner) and copied into the
// residual stream in place of the embedding gather.
func (r *Runner) beginEmbeddings(emb []float32, T int) error {
	d := r.cfg.HiddenSize
	if err := r.checkPiece(T); err != nil {
		return err
	}
	if len(emb) < T*d {
		return fmt.Errorf("wgsl: forward: %d embedding values for %d tokens of width %d", len(emb), T, d)
	}
	for i, v := range emb[:T*d] {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("wgsl: forward: input embedding %d (token %d) is %v", i, i/d, v)
		}
	}
	if err := r.d.Flush(); err != nil {
		return err
	}
	if err := r.embIn.WriteF32(0, emb[:T*d]); err != nil {
		return fmt.Errorf("wgsl: forward: upload embeddings: %w", err)
	}
	return r.start(T, true)
}

func (r *Runner) checkPiece(T int) error {
	if T <= 0 {
		return fmt.Errorf("wgsl: forward: no tokens")
	}
	if T > r.opt.MaxChunk {
		return fmt.Errorf("wgsl: forward: %d tokens exceed the runner's chunk of %d", T, r.opt.MaxChunk)
	}
	if r.pos+T > r.opt.MaxContext {
		return fmt.Errorf("wgsl: forward: position %d exceeds the runner's context of %d tokens", r.pos+T, r.opt.MaxContext)
	}
	return nil
}

// start records the piece of T tokens whose input is in tok or embIn.
func (r *Runner) start(T int, fromEmb bool) error {
	r.last = RunnerStats{Tokens: T, Dispatches: r.d.Dispatches, Submits: r.d.Submits}
	r.fromEmb = fromEmb
	if err := r.record(T); err != nil {
		return fmt.Errorf("wgsl: forward at position %d: %w (state is undefined: Reset)", r.pos, err)
	}
	r.pos += T
	return nil
}

func (r *Runner) end() {
	r.last.Dispatches = r.d.Dispatches - r.last.Dispatches
	r.last.Submits = r.d.Submits - r.last.Submits
}

// Forward runs tokens (at most MaxChunk) through the model at the current
// position, updating the GPU state, like model.Runner.Forward. If logits is
// non-nil it receives the logits of the last token ([V]) or, when
// len(logits) ≥ T·V, of every token ([T, V]). With nil logits the step is
// submitted without waiting. After an error the state is undefined: Reset.
func (r *Runner) Forward(tokens []int, logits []float32) error {
	if err := r.begin(tokens); err != nil {
		return err
	}
	defer r.end()
	return r.readLogits(len(tokens), logits)
}

// ForwardEmbeddings is Forward for a piece given as input embeddings
// ([T, d], e.g. text embeddings with image features spliced in): they
// replace the embedding gather; logits as in Forward.
func (r *Runner) ForwardEmbeddings(emb []float32, T int, logits []float32) error {
	if err := r.beginEmbeddings(emb, T); err != nil {
		return err
	}
	defer r.end()
	return r.readLogits(T, logits)
}

func (r *Runner) readLogits(T int, logits []float32) error {
	if logits == nil {
		return r.d.Flush()
	}
	V, d := r.cfg.VocabSize, r.cfg.HiddenSize
	if len(logits) >= T*V {
		if err := r.d.Linear(r.logits.At(0), r.xn.At(0), T, r.lmHead); err != nil {
			return err
		}
		return r.d.ReadF32(r.logits.At(0), logits[:T*V])
	}
	if len(logits) < V {
		return fmt.Errorf("wgsl: forward: logits buffer of %d < vocabulary %d", len(logits), V)
	}
	if err := r.d.Linear(r.logits.At(0), r.xn.At((T-1)*d), 1, r.lmHead); err != nil {
		return err
	}
	return r.d.ReadF32(r.logits.At(0), logits[:V])
}

// Greedy runs tokens like Forward and returns the argmax of the last
// token's logits, computed on the GPU: only the token id (one word) is
// read back. Decoding calls it with one token per step.
func (r *Runner) Greedy(tokens []int) (int, error) {
	return r.SampleNext(tokens, generate.SamplerOptions{}, r.cfg.VocabSize, 0)
}

// SamplesOnDevice reports whether SampleNext can pick from vocab logits
// with opt on the GPU (generate.DeviceSampler): greedy always; sampling
// when vocab fits the sampling kernel's loop budget (SampleOnGPU).
func (r *Runner) SamplesOnDevice(opt generate.SamplerOptions, vocab int) bool {
	if vocab <= 0 || vocab > r.cfg.VocabSize {
		return false
	}
	return opt.Temperature == 0 || SampleOnGPU(vocab)
}

// SampleNext runs tokens like Forward and returns the next token picked on
// the GPU from the first vocab logits of the last token: the argmax when
// opt.Temperature is 0, else the token generate.Sampler.SampleDraw picks
// for the draw u (Device.Sample). Only the token id is read back; the
// repetition penalty is not supported (sample on the host for it).
func (r *Runner) SampleNext(tokens []int, opt generate.SamplerOptions, vocab int, u float64) (int, error) {
	if !r.SamplesOnDevice(opt, vocab) {
		return 0, fmt.Errorf("wgsl: cannot sample from %d of %d logits on the GPU", vocab, r.cfg.VocabSize)
	}
	if p := opt.RepetitionPenalty; p != 0 && p != 1 {
		return 0, fmt.Errorf("wgsl: the repetition penalty is applied on the host: sample from the logits")
	}
	if err := r.begin(tokens); err != nil {
		return 0, err
	}
	defer r.end()
	return r.sampleLast(len(tokens), opt, vocab, u)
}

// SampleNextEmbeddings is SampleNext for a piece given as input embeddings
// ([T, d], as ForwardEmbeddings): the first token after a multimodal
// prompt is picked on the GPU too (generate.DeviceEmbeddingSampler).
func (r *Runner) SampleNextEmbeddings(emb []float32, T int, opt generate.SamplerOptions, vocab int, u float64) (int, error) {
	if !r.SamplesOnDevice(opt, vocab) {
		return 0, fmt.Errorf("wgsl: cannot sample from %d of %d logits on the GPU", vocab, r.cfg.VocabSize)
	}
	if p := opt.RepetitionPenalty; p != 0 && p != 1 {
		return 0, fmt.Errorf("wgsl: the repetition penalty is applied on the host: sample from the logits")
	}
	if err := r.beginEmbeddings(emb, T); err != nil {
		return 0, err
	}
	defer r.end()
	return r.sampleLast(T, opt, vocab, u)
}

// sampleLast records the lm_head of the last of T tokens and the sampler
// after the recorded piece, and reads back the token id.
func (r *Runner) sampleLast(T int, opt generate.SamplerOptions, vocab int, u float64) (int, error) {
	d := r.cfg.HiddenSize
	if err := r.d.Linear(r.logits.At(0), r.xn.At((T-1)*d), 1, r.lmHead); err != nil {
		return 0, err
	}
	var err error
	if opt.Temperature == 0 {
		err = r.d.Argmax(r.outTok.At(0), r.logits.At(0), vocab)
	} else {
		err = r.d.Sample(r.outTok.At(0), r.logits.At(0), r.weights.At(0), vocab, SampleParams{
			Temperature: opt.Temperature, TopK: opt.TopK, TopP: opt.TopP, MinP: opt.MinP, U: u})
	}
	if err != nil {
		return 0, err
	}
	var id [1]uint32
	if err := r.d.ReadU32(r.outTok.At(0), id[:]); err != nil {
		return 0, err
	}
	return int(id[0]), nil
}

// layerDone ends a layer: multi-token pieces submit each layer as its own
// command buffer, so no submission of a long prefill approaches the 5 s
// wait limit of the binding (bug 5); decoding keeps one command buffer per
// token.
func (r *Runner) layerDone(T int) error {
	if T == 1 {
		return nil
	}
	return r.d.Flush()
}

// record mirrors model.Runner.forwardEmbedded for T tokens whose ids are
// in r.tok, leaving the final-normed hidden states in r.xn.
func (r *Runner) record(T int) error {
	c, dv := r.cfg, r.d
	d, eps := c.HiddenSize, c.RMSNormEps
	xn := r.xn.At(0)
	if c.AttnResBlockSize == 0 {
		h := r.h.At(0)
		if err := r.embedInput(h.Rows(d), T); err != nil {
			return err
		}
		for i := range r.layers {
			l := &r.layers[i]
			if err := dv.RMSNorm(xn, h, l.in, T, d, eps); err != nil {
				return err
			}
			// the mixer's and the FFN's output projections add into h
			if err := r.mixer(l, T, h.Rows(d), true); err != nil {
				return fmt.Errorf("layer %d mixer: %w", i, err)
			}
			if err := dv.RMSNorm(xn, h, l.post, T, d, eps); err != nil {
				return err
			}
			if err := r.ffnBlock(l, T, h.Rows(d)); err != nil {
				return fmt.Errorf("layer %d ffn: %w", i, err)
			}
			if err := r.layerDone(T); err != nil {
				return err
			}
		}
		return dv.RMSNorm(xn, h, r.norm, T, d, eps)
	}
	{
		// Block AttnRes: token t's slots are [t][nslots][d]; completed
		// block b sits in slot b and the running partial sum p in slot nb,
		// so "block nb := p" needs no copy.
		S, ts := c.AttnResBlockSize, r.nslots*d
		src := r.slots.At(0).Rows(d)
		p := func(nb int) Strided { return r.slots.At(nb * d).Rows(ts) }
		if err := r.embedInput(p(0), T); err != nil {
			return err
		}
		nb, havePart := 0, true
		for i := range r.layers {
			l := &r.layers[i]
			// the AttnRes read and the input norm in one dispatch (layer 0
			// reads the embedding straight from its slot)
			var err error
			if nb > 0 {
				err = dv.AttnResNorm(xn.Rows(d), src, ts, nb+b2i(havePart), d, T, l.resProj, l.resNorm, eps, l.in, eps)
			} else {
				err = dv.RMSNormRows(xn.Rows(d), p(nb), l.in, T, d, eps)
			}
			if err != nil {
				return err
			}
			if i%S == 0 {
				nb++
				havePart = false
			}
			// the mixer's output projection writes (new block) or adds
			// into the partial sum, and so does the FFN's
			if err := r.mixer(l, T, p(nb), havePart); err != nil {
				return fmt.Errorf("layer %d mixer: %w", i, err)
			}
			havePart = true
			if err := dv.AttnResNorm(xn.Rows(d), src, ts, nb+1, d, T, l.mlpProj, l.mlpNorm, eps, l.post, eps); err != nil {
				return err
			}
			if err := r.ffnBlock(l, T, p(nb)); err != nil {
				return fmt.Errorf("layer %d ffn: %w", i, err)
			}
			if err := r.layerDone(T); err != nil {
				return err
			}
		}
		return dv.AttnResNorm(xn.Rows(d), src, ts, nb+1, d, T, r.outProj, r.outNorm, eps, r.norm, eps)
	}
}

// embedInput records the piece's input rows into out: the embedding
// gather of the ids in tok, or a copy of the embeddings in embIn.
func (r *Runner) embedInput(out Strided, T int) error {
	if r.fromEmb {
		d := r.cfg.HiddenSize
		return r.d.Copy(out, r.embIn.At(0).Rows(d), T, d)
	}
	return r.d.Embed(out, r.embed, r.tok.At(0), T)
}

// mixer records layer l's token mixer, its output projection written to
// out (accum false) or added into it (accum true).
func (r *Runner) mixer(l *gpuLayer, T int, out Strided, accum bool) error {
	if l.kda != nil {
		return r.kdaMixer(l.kda, T, out, accum)
	}
	return r.mlaMixer(l.mla, T, out, accum)
}

// project records out = x·Wᵀ, or out += x·Wᵀ when accum.
func (r *Runner) project(out Strided, accum bool, x View, T int, W *Mat) error {
	if accum {
		return r.d.LinearAccum(out.View, out.Stride, x, W.Cols, T, W)
	}
	return r.d.LinearStrided(out.View, out.Stride, x, W.Cols, T, W)
}

// seq runs fs in order, stopping at the first error.
func seq(fs ...func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}

func (r *Runner) kdaMixer(w *gpuKDA, T int, out Strided, accum bool) error {
	c, dv := r.cfg, r.d
	H, dk, K := c.KDAHeads, c.KDAHeadDim, c.ConvKernel
	hd := H * dk
	xn := r.xn.At(0)
	step := r.opt.MaxChunk * hd
	q, k, v, qc, kc, vc := r.q.At(0), r.k.At(0), r.v.At(0), r.qkvc.At(0), r.qkvc.At(step), r.qkvc.At(2*step)
	beta, fa, g, o, gate := r.beta.At(0), r.fa.At(0), r.g.At(0), r.o.At(0), r.gate.At(0)
	ga := fa // the low-rank gate's first product reuses fa's buffer
	project := func() error {
		return seq(
			func() error { return dv.Linear(q, xn, T, w.qp) },
			func() error { return dv.Linear(k, xn, T, w.kp) },
			func() error { return dv.Linear(v, xn, T, w.vp) },
			func() error { return dv.Linear(beta, xn, T, w.b) },
			func() error { return dv.Linear(fa, xn, T, w.fa) })
	}
	fused := T == 1 && w.in != nil
	if fused {
		// one GEMV for all projections of xn: [q k v β f_a (g | g_a)]
		pr := func(off int) View { return r.proj.At(off) }
		q, k, v, beta, fa = pr(0), pr(hd), pr(2*hd), pr(3*hd), pr(3*hd+H)
		if w.g != nil {
			gate = pr(3*hd + H + w.fa.Rows)
		} else {
			ga = pr(3*hd + H + w.fa.Rows)
		}
		project = func() error { return dv.Linear(r.proj.At(0), xn, 1, w.in) }
	}
	qScale := float32(1 / math.Sqrt(float64(dk)))
	prep := func() error {
		if fused { // conv, L2 norms and σ(β) in one dispatch
			tail := (K - 1) * hd
			return dv.KDAPrep(qc, step, q, beta, w.qconv, w.convQ, tail, H, dk, K, qScale, 1e-6)
		}
		return seq(
			func() error { return dv.ShortConv(qc, q, w.qconv, w.convQ, T, hd, K) },
			func() error { return dv.ShortConv(kc, k, w.kconv, w.convK, T, hd, K) },
			func() error { return dv.ShortConv(vc, v, w.vconv, w.convV, T, hd, K) },
			func() error { return dv.L2Norm(qc, qc, T*H, dk, 1e-6, qScale) },
			func() error { return dv.L2Norm(kc, kc, T*H, dk, 1e-6, 1) },
			func() error { return dv.Sigmoid(beta.Rows(T*H), beta.Rows(T*H), 1, T*H) })
	}
	return seq(
		project,
		prep,
		func() error { // f_b with the gate as its epilogue: one dispatch
			return dv.LinearKDAGate(g, fa, T, w.fb, KDAGateEpilogue{H: H, DK: dk, DtBias: w.dtBias, ALog: w.aLog,
				PerChannel: w.perChannel, Bounded: c.GateBounded, LowerBound: c.GateLowerBound})
		},
		func() error {
			return dv.KDARecurrent(&KDAArgs{T: T, H: H, DK: dk, DV: dk, Q: qc, K: kc, V: vc, G: g, Beta: beta, O: o, S: w.S})
		},
		func() error {
			switch {
			case w.g != nil && fused:
				return nil
			case w.g != nil:
				return dv.Linear(gate, xn, T, w.g)
			case !fused:
				if err := dv.Linear(ga, xn, T, w.ga); err != nil {
					return err
				}
			}
			return dv.Linear(gate, ga, T, w.gb)
		},
		func() error {
			if T == 1 && hd <= maxGatedNormCols { // decode: the gated norm inside o_proj's GEMV
				return dv.LinearGatedNorm(out.View, accum, o, gate, w.o, w.oNorm, dk, c.RMSNormEps, ref.GateSigmoid)
			}
			return seq(
				func() error { return dv.RMSNormGated(o, o, gate, w.oNorm, T*H, dk, c.RMSNormEps, ref.GateSigmoid) },
				func() error { return r.project(out, accum, o, T, w.o) })
		},
	)
}

func (r *Runner) mlaMixer(w *gpuMLA, T int, out Strided, accum bool) error {
	c, dv := r.cfg, r.d
	H, dn, dr, dvh, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	xn, q, kva, o, gate := r.xn.At(0), r.q.At(0), r.kva.At(0), r.o.At(0), r.gate.At(0)
	qa := r.qa.At(0)
	cache := w.cache
	pos0 := cache.Len
	fused := T == 1 && w.in != nil
	if fused {
		// one GEMV for all projections of xn: [(q | q_a) kv_a g]
		n := 0
		if w.q != nil {
			q, n = r.proj.At(0), w.q.Rows
		} else {
			qa, n = r.proj.At(0), w.qa.Rows
		}
		kva = r.proj.At(n)
		gate = r.proj.At(n + w.kva.Rows)
	}
	return seq(
		func() error {
			if fused {
				return dv.Linear(r.proj.At(0), xn, 1, w.in)
			}
			if w.q != nil {
				return dv.Linear(q, xn, T, w.q)
			}
			return dv.Linear(qa, xn, T, w.qa)
		},
		func() error {
			if w.q != nil {
				return nil
			}
			return seq(
				func() error { return dv.RMSNorm(qa, qa, w.qaNorm, T, c.QLoraRank, c.RMSNormEps) },
				func() error { return dv.Linear(q, qa, T, w.qb) })
		},
		func() error {
			if fused {
				return nil
			}
			return dv.Linear(kva, xn, T, w.kva)
		},
		func() error { return dv.Append(cache, kva, rkv+dr, T) },
		func() error { return dv.RMSNormCacheRows(cache, pos0, T, rkv, w.kvaNorm, c.RMSNormEps) },
		func() error {
			a := &MLAArgs{N: T, H: H, DN: dn, DR: dr, DV: dvh, RKV: rkv, Pos0: pos0,
				Scale: float32(1 / math.Sqrt(float64(dn+dr))), Q: q, WKVB: w.kvb, Cache: cache, O: o}
			if T == 1 {
				return dv.MLAAbsorbed(a)
			}
			return dv.MLANaive(a)
		},
		func() error {
			if w.g == nil {
				return nil
			}
			if !fused {
				if err := dv.Linear(gate, xn, T, w.g); err != nil {
					return err
				}
			}
			return dv.SigmoidGate(o.Rows(T*H*dvh), gate.Rows(T*H*dvh), o.Rows(T*H*dvh), 1, T*H*dvh)
		},
		func() error { return r.project(out, accum, o, T, w.o) },
	)
}

func (r *Runner) act() ref.Act {
	c := r.cfg
	return ref.Act{SiTU: c.SiTU, Beta: c.SiTUBeta, BetaLin: c.SiTULinearBeta}
}

// ffnBlock records layer l's FFN (dense MLP or MoE with shared experts),
// adding its output into out.
func (r *Runner) ffnBlock(l *gpuLayer, T int, out Strided) error {
	c, dv := r.cfg, r.d
	d := c.HiddenSize
	xn, hb := r.xn.At(0), r.hb.At(0)
	dense := Routing{K: 1}
	if l.mlp != nil {
		return seq(
			func() error { return dv.GLUGateUp(hb, xn.Rows(d), T, l.mlp, dense, r.act()) },
			func() error { return dv.GLUDown(out, hb, T, l.mlp, dense, true) })
	}
	w := l.moe
	E, wd := c.NumExperts, c.ExpertWidth()
	rt := Routing{Idx: r.idx.At(0), Wts: r.wts.At(0), K: c.TopK}
	router := ref.Router{TopK: c.TopK, Groups: c.NumExpertGroup, TopKGroups: c.TopKGroup,
		Renormalize: c.Renormalize, Scale: c.RoutedScalingFactor}
	z, elog := xn, r.elog.At(0)
	if w.downProj != nil {
		z = r.lat.At(0)
	}
	grouped := groupExperts && T > 1 && r.gord != nil && GroupedFits(w.experts, T, c.TopK)
	fused := T == 1 && w.in != nil
	if fused {
		// one GEMV for the router logits and the latent down-projection
		elog, z = r.proj.At(0), r.proj.At(E)
	}
	return seq(
		func() error {
			if fused {
				return dv.Linear(r.proj.At(0), xn, 1, w.in)
			}
			return dv.Linear(elog, xn, T, w.gate)
		},
		func() error { return dv.Route(rt.Idx, rt.Wts, elog, w.bias, T, E, router) },
		func() error {
			if w.downProj == nil || fused {
				return nil
			}
			return dv.Linear(z, xn, T, w.downProj)
		},
		func() error {
			if grouped {
				return nil
			}
			return dv.GLUGateUp(hb, z.Rows(wd), T, w.experts, rt, r.act())
		},
		func() error {
			// routed experts: per (token, slot) for a decode step; grouped
			// by expert for a prefill piece (weights read once per 8 tokens)
			routed := func(dst Strided, accum bool) error {
				if grouped {
					sc := GroupScratch{Ord: r.gord.At(0), H: hb, Y: r.gy.At(0)}
					return dv.GLUGrouped(dst, z.Rows(wd), T, w.experts, rt, r.act(), accum, sc)
				}
				return dv.GLUDown(dst, hb, T, w.experts, rt, accum)
			}
			if w.upProj == nil {
				return routed(out, true)
			}
			acc := r.racc.At(0)
			if T == 1 && w.hasNorm { // decode: the latent RMSNorm inside the up-projection's GEMV
				return seq(
					func() error { return routed(acc.Rows(wd), false) },
					func() error { return dv.LinearNormedAccum(out.View, acc, w.upProj, w.norm, c.RMSNormEps) })
			}
			return seq(
				func() error { return routed(acc.Rows(wd), false) },
				func() error {
					if !w.hasNorm {
						return nil
					}
					return dv.RMSNorm(acc, acc, w.norm, T, wd, c.RMSNormEps)
				},
				func() error { return r.project(out, true, acc, T, w.upProj) })
		},
		func() error {
			if w.shared == nil {
				return nil
			}
			return seq(
				func() error { return dv.GLUGateUp(hb, xn.Rows(d), T, w.shared, dense, r.act()) },
				func() error { return dv.GLUDown(out, hb, T, w.shared, dense, true) })
		},
	)
}
