//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
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
	// MemoryBudget, when > 0, is the GPU memory the runner may use
	// (WebGPU does not tell how much memory a device has). A model whose
	// estimate exceeds it streams its routed experts through as many
	// slots per MoE layer as the budget holds (stream.go); NewRunner
	// refuses it when not even top-k slots fit beside the dense part.
	MemoryBudget int64
	// ExpertSlots, when > 0, sets the routed experts kept on the GPU per
	// MoE layer (at least top-k; the budget is not consulted), streaming
	// the rest; ≥ the layer's experts keeps them all.
	ExpertSlots int
	// ExpertShare, when in (0, 1) and ExpertSlots is 0, keeps that share
	// of each MoE layer's experts on the GPU (at least top-k): a budget
	// given as a percentage of the experts (MemoryBudget is then not
	// consulted).
	ExpertShare float64
	// CPUMoELayers computes the routed experts of the first N MoE layers
	// on the CPU (llama.cpp's --n-cpu-moe; cpumoe.go): their expert
	// weights stay in host memory and do not count against the budget.
	CPUMoELayers int
	// UploadFault, if set (tests), is called before each expert upload;
	// an error fails the upload as a device error would.
	UploadFault func(layer, expert int) error
}

// RunnerStats describes the last Forward or Greedy call.
type RunnerStats struct {
	Tokens     int // tokens processed
	Dispatches int // compute dispatches recorded
	Submits    int // command buffers submitted (1 unless a step overflowed the uniform arena)
}

// Runner evaluates a model entirely on the GPU: the family's forward pass
// (core/model's k3.go, the one the CPU runs) over the WebGPU backend
// (gpu.go). All weights are uploaded once, all activations, KDA states,
// conv tails and MLA latent caches live in GPU buffers allocated by
// NewRunner, and a Forward call records a decode step into one command
// buffer (a multi-token piece is submitted layer by layer). Nothing is
// created per token. The Runner holds the state of one sequence (State).
// It is not safe for concurrent use.
//
// KDA prefill pieces of 4 tokens or more run the chunked WY/UT form
// (Device.KDA, kdaUseChunked; doc.go), decode steps and shorter pieces
// the recurrent kernel; prefill cost is O(T·H·dk·dv) per layer
// either way. Routed MoE experts of a decode step run per (token, slot)
// with the ids the GPU router wrote; a prefill piece groups its slots by
// expert on the GPU (GLUGrouped), reading each selected expert's weights
// once per 8 of its tokens instead of once per token.
type Runner struct {
	d   *Device
	cfg *config.Config
	opt RunnerOptions

	// longWait: this runner's steps may take seconds (MaxContext ≥
	// longWaitContext), so the device waits by polling (bug 5).
	longWait bool

	b      *gpu
	graph  nn.Graph
	st     *gpuState
	lmHead *Mat
	hidden nn.Tensor // the last piece's final-normed hidden states

	logits, outTok *Buffer
	weights        *Buffer // [V] sampling scratch

	// the logit bias as a dense [V] vector (made at its first use) and
	// the entries it holds, so a generation uploads it once
	bias     *Buffer
	biasHost []float32
	biasSet  []generate.TokenBias

	live liveState // the live routing/state view (live.go)

	last RunnerStats

	xmu   sync.Mutex // guards xsnap, the expert counters as of the last step
	xsnap ExpertStats
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
	opt = opt.withDefaults(m.Cfg)
	need := EstimateMemory(m, opt)
	slots := opt.ExpertSlots
	if slots <= 0 && opt.ExpertShare > 0 && opt.ExpertShare < 1 {
		slots = max(need.TopK, min(int(opt.ExpertShare*float64(need.Experts)), need.BindingSlots))
	}
	if slots <= 0 {
		slots = need.Slots(opt.MemoryBudget)
		if need.Experts == 0 && opt.MemoryBudget > 0 && need.Total() > opt.MemoryBudget {
			return nil, &MemoryError{Need: need, Budget: opt.MemoryBudget, MaxContext: opt.MaxContext}
		}
		if need.Experts > 0 && slots < need.TopK {
			return nil, &MemoryError{Need: need, Min: need.MinTotal(), Budget: opt.MemoryBudget, MaxContext: opt.MaxContext}
		}
	} else if need.Experts > 0 && slots < need.TopK {
		return nil, fmt.Errorf("wgsl: NewRunner: %d expert slots per MoE layer, fewer than the %d experts a token routes to", slots, need.TopK)
	}
	if need.Experts > 0 && need.BindingSlots < need.TopK {
		return nil, fmt.Errorf("wgsl: NewRunner: one storage binding holds %d of a MoE layer's experts, fewer than the %d a token routes to", need.BindingSlots, need.TopK)
	}
	r := &Runner{d: d, cfg: m.Cfg, opt: opt, b: newGPU(d, m.Cfg.TopK)}
	r.b.expertSlots, r.b.uploadFault, r.b.cpuLayers = slots, opt.UploadFault, opt.CPUMoELayers
	r.b.maxContext = opt.MaxContext
	if opt.MaxContext >= longWaitContext {
		r.longWait = true
		d.longWaits++
	}
	err := r.load(m)
	if w := kdaPrefillScratch(m.Cfg, opt.MaxChunk); err == nil && w > 0 {
		_, err = d.scratchBuf("kda", w) // taken now: a device out of memory fails the load, not a prefill
	}
	if err != nil {
		got := r.Bytes()
		r.Close()
		if isOutOfMemory(err) {
			return nil, &MemoryError{Need: need, Allocated: got, MaxContext: opt.MaxContext, Err: err}
		}
		return nil, err
	}
	r.publish()
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

// Bytes is the GPU memory the runner's buffers take.
func (r *Runner) Bytes() int64 { return r.b.bytes() }

// StateBytes is the GPU memory of the sequence state: KDA states and conv
// tails plus the MLA latent caches' pages (allocated for MaxContext).
func (r *Runner) StateBytes() int64 { return r.st.Bytes() }

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
	for li, c := range r.st.caches {
		if c == nil {
			continue
		}
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
	r.st.pos = L
	return r.d.Sync()
}

// Close releases every buffer the runner created (not the Device).
func (r *Runner) Close() {
	if r == nil {
		return
	}
	_ = r.d.Sync()
	r.b.release()
	if r.bias != nil {
		r.bias.Release()
		r.bias, r.biasHost, r.biasSet = nil, nil, nil
	}
	if r.longWait {
		r.d.longWaits--
		r.longWait = false
	}
}

// Device returns the device the runner runs on.
func (r *Runner) Device() *Device { return r.d }

// Pos is the number of tokens of the current sequence processed so far.
func (r *Runner) Pos() int { return r.st.pos }

// MaxChunk is the largest number of tokens one Forward call accepts.
func (r *Runner) MaxChunk() int { return r.opt.MaxChunk }

// MaxContext is the longest sequence the runner can hold.
func (r *Runner) MaxContext() int { return r.opt.MaxContext }

// Stats describes the last Forward or Greedy call; after a one-token
// Greedy call, Dispatches is the number of dispatches per decoded token.
func (r *Runner) Stats() RunnerStats { return r.last }

// ExpertStats counts the routed-expert cache's work since the runner was
// made, as of the end of the last Forward or Sample call (zero counters,
// Streaming false, when every expert is resident). Safe to call while
// another goroutine runs the runner (a live view).
func (r *Runner) ExpertStats() ExpertStats {
	r.xmu.Lock()
	defer r.xmu.Unlock()
	return r.xsnap
}

// publish makes the expert counters visible to ExpertStats.
func (r *Runner) publish() {
	r.xmu.Lock()
	r.xsnap = r.b.xstats
	r.xmu.Unlock()
}

// Reset empties the sequence state (KDA states and conv tails zeroed,
// latent caches emptied) for a new sequence.
func (r *Runner) Reset() error { return r.st.Reset() }

// load uploads m's weights as its family declares them, allocates the
// sequence state from its StateSpec and the forward pass's scratch
// (Build), and the runner's own buffers.
func (r *Runner) load(m *model.Model) error {
	c := r.cfg
	T := r.opt.MaxChunk
	b := r.b
	m.Declare(b)
	if b.err != nil {
		return b.err
	}
	if r.lmHead = b.mats[m.Head()]; r.lmHead == nil || b.mats[m.EmbedTokens] == nil {
		return fmt.Errorf("wgsl: runner: model without embed_tokens or lm_head")
	}
	st, err := r.newState(m.StateSpec())
	if err != nil {
		return err
	}
	r.st = st
	alloc := func(words int) *Buffer {
		if b.err != nil {
			return nil
		}
		buf, err := r.b.newBuf(words)
		b.fail(err)
		return buf
	}
	b.proj = alloc(max(b.maxIn, 1))
	b.hb = alloc(T * max(b.maxI, 1))
	if b.maxE > 0 { // grouped routed experts for prefill pieces
		b.gord = alloc(b.maxE + 1 + T*c.TopK)
		b.gy = alloc(T * c.TopK * b.maxOut)
	}
	b.tok = alloc(T)
	b.tokHost = make([]uint32, T)
	if b.cpuMoE != nil {
		b.cpuMoE.alloc(b, T, c.TopK, max(c.HiddenSize, c.ExpertWidth()))
	}
	if len(b.streams) > 0 {
		b.slotIdx, b.maskWts = alloc(T*c.TopK), alloc(T*c.TopK)
		b.idxHost, b.slotHost = make([]uint32, T*c.TopK), make([]uint32, T*c.TopK)
		b.wtsHost, b.maskHost = make([]float32, T*c.TopK), make([]float32, T*c.TopK)
	}
	b.embIn = alloc(T * c.HiddenSize)
	r.logits = alloc(T * c.VocabSize)
	r.outTok = alloc(1)
	r.weights = alloc(c.VocabSize)
	r.graph = m.Build(b, T)
	if b.err != nil {
		return b.err
	}
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

// gpuState is the GPU sequence state (nn.State): per layer its fixed
// tensors (K3's KDA state and conv tails) contiguous in one buffer, and
// its cache (K3's paged MLA latent cache), and the position.
type gpuState struct {
	r      *Runner
	pos    int
	fixed  [][]nn.Tensor
	bufs   []*Buffer // per layer, the fixed tensors' buffer
	caches []*LatentCache
	zeros  []float32
}

func (r *Runner) newState(spec []nn.LayerState) (*gpuState, error) {
	s := &gpuState{r: r, fixed: make([][]nn.Tensor, len(spec)), bufs: make([]*Buffer, len(spec)),
		caches: make([]*LatentCache, len(spec))}
	maxWords := 0
	for i, l := range spec {
		words := 0
		for _, n := range l.Fixed {
			words += n
		}
		if words > 0 {
			buf, err := r.b.newBuf(words)
			if err != nil {
				return nil, fmt.Errorf("wgsl: runner: layer %d state: %w", i, err)
			}
			s.bufs[i] = buf
			off := 0
			for _, n := range l.Fixed {
				s.fixed[i] = append(s.fixed[i], &gt{v: buf.At(off), cols: n, stride: n})
				off += n
			}
			maxWords = max(maxWords, words)
		}
		if l.CacheWidth > 0 {
			pageRows := r.opt.CachePageRows
			if pageRows == 0 {
				pageRows = DefaultPageRows(l.CacheWidth, r.opt.MaxContext)
			}
			c, err := r.d.NewPagedLatentCache(l.CacheWidth, r.opt.MaxContext, pageRows)
			if err != nil {
				return nil, fmt.Errorf("wgsl: runner: layer %d: %w", i, err)
			}
			r.b.bufs = append(r.b.bufs, c.Pages...)
			s.caches[i] = c
		}
	}
	s.zeros = make([]float32, maxWords)
	return s, nil
}

// State is the runner's sequence state (generate.Backend).
func (r *Runner) State() nn.State { return r.st }

func (s *gpuState) Pos() int                     { return s.pos }
func (s *gpuState) Advance(n int)                { s.pos += n }
func (s *gpuState) Fixed(layer, i int) nn.Tensor { return s.fixed[layer][i] }

func (s *gpuState) Cache(layer int) nn.Cache {
	if c := s.caches[layer]; c != nil {
		return c
	}
	return nil
}

// Reset zeroes the fixed tensors and empties the caches.
func (s *gpuState) Reset() error {
	s.r.live.fresh = false
	for _, b := range s.bufs {
		if b != nil {
			if err := b.WriteF32(0, s.zeros[:b.Words()]); err != nil {
				return fmt.Errorf("wgsl: runner reset: %w", err)
			}
		}
	}
	for _, c := range s.caches {
		if c != nil {
			c.Len = 0
		}
	}
	s.pos = 0
	return nil
}

// Bytes is the GPU memory of the state.
func (s *gpuState) Bytes() int64 {
	var n int64
	for _, b := range s.bufs {
		if b != nil {
			n += 4 * int64(b.Words())
		}
	}
	for _, c := range s.caches {
		if c != nil {
			n += c.Bytes()
		}
	}
	return n
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
	}
	if err := r.d.Flush(); err != nil {
		return err
	}
	return r.start(nn.Input{IDs: tokens}, T)
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
	return r.start(nn.Input{Emb: emb[:T*d]}, T)
}

func (r *Runner) checkPiece(T int) error {
	if T <= 0 {
		return fmt.Errorf("wgsl: forward: no tokens")
	}
	if T > r.opt.MaxChunk {
		return fmt.Errorf("wgsl: forward: %d tokens exceed the runner's chunk of %d", T, r.opt.MaxChunk)
	}
	if r.st.pos+T > r.opt.MaxContext {
		return fmt.Errorf("wgsl: forward: position %d exceeds the runner's context of %d tokens", r.st.pos+T, r.opt.MaxContext)
	}
	return nil
}

// start records the piece of T tokens: the family's forward pass, leaving
// the final-normed hidden states in r.hidden.
func (r *Runner) start(in nn.Input, T int) error {
	r.last = RunnerStats{Tokens: T, Dispatches: r.d.Dispatches, Submits: r.d.Submits}
	r.live.fresh = false
	if r.b.xstats.Streaming || r.b.xstats.CPULayers > 0 {
		r.b.xstats.Tokens += int64(T)
	}
	pos := r.st.pos
	r.b.Begin()
	defer r.b.end()
	r.hidden = r.graph.Forward(r.st, in, T)
	if err := r.b.Err(); err != nil {
		return fmt.Errorf("wgsl: forward at position %d: %w (state is undefined: Reset)", pos, err)
	}
	return nil
}

// hiddenRow is token t's final hidden state of the last piece.
func (r *Runner) hiddenRow(t int) View {
	h := g(r.hidden)
	return View{h.v.Buf, h.v.Off + t*h.stride}
}

func (r *Runner) end() {
	r.publish()
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
	return r.routes(r.readLogits(len(tokens), logits))
}

// ForwardEmbeddings is Forward for a piece given as input embeddings
// ([T, d], e.g. text embeddings with image features spliced in): they
// replace the embedding gather; logits as in Forward.
func (r *Runner) ForwardEmbeddings(emb []float32, T int, logits []float32) error {
	if err := r.beginEmbeddings(emb, T); err != nil {
		return err
	}
	defer r.end()
	return r.routes(r.readLogits(T, logits))
}

func (r *Runner) readLogits(T int, logits []float32) error {
	if logits == nil {
		return r.d.Flush()
	}
	V := r.cfg.VocabSize
	if len(logits) >= T*V {
		if err := r.d.Linear(r.logits.At(0), r.hiddenRow(0), T, r.lmHead); err != nil {
			return err
		}
		return r.d.ReadF32(r.logits.At(0), logits[:T*V])
	}
	if len(logits) < V {
		return fmt.Errorf("wgsl: forward: logits buffer of %d < vocabulary %d", len(logits), V)
	}
	if err := r.d.Linear(r.logits.At(0), r.hiddenRow(T-1), 1, r.lmHead); err != nil {
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
// when vocab fits the sampling kernel's loop budget (SampleOnGPU); never
// with a repetition penalty (generate.SamplerOptions.Penalizes).
func (r *Runner) SamplesOnDevice(opt generate.SamplerOptions, vocab int) bool {
	return r.deviceSampling(opt, vocab) == nil
}

// deviceSampling says why the GPU cannot pick from vocab logits with opt
// (nil: it can): a repetition penalty needs the history on the host
// (generate.SamplerOptions.Penalizes), and sampling needs vocab within the
// kernel's loop budget.
func (r *Runner) deviceSampling(opt generate.SamplerOptions, vocab int) error {
	switch {
	case opt.Penalizes():
		return errors.New("wgsl: the repetition penalty is applied on the host: sample from the logits")
	case vocab <= 0 || vocab > r.cfg.VocabSize || (opt.Temperature != 0 && !SampleOnGPU(vocab)):
		return fmt.Errorf("wgsl: cannot sample from %d of %d logits on the GPU", vocab, r.cfg.VocabSize)
	}
	return nil
}

// deviceBan is a banned token's bias on the GPU: a finite stand-in for
// the host's −∞ (generate.TokenBias.Bans), since WGSL may assume no infinities;
// every sampler gives it probability 0 as it does −∞.
const deviceBan = -1e30

// setBias makes r.bias hold lb (ids checked by generate's ValidateVocab),
// uploading it only when it differs from what the buffer holds. It runs
// before a piece is recorded: a write flushes recorded work.
func (r *Runner) setBias(lb []generate.TokenBias) error {
	if len(lb) == 0 || slices.Equal(lb, r.biasSet) {
		return nil
	}
	V := r.cfg.VocabSize
	if r.bias == nil {
		b, err := r.d.NewBuffer(V)
		if err != nil {
			return fmt.Errorf("wgsl: the logit bias buffer: %w", err)
		}
		r.bias, r.biasHost = b, make([]float32, V)
	}
	clear(r.biasHost)
	for _, b := range lb {
		if b.ID < 0 || b.ID >= V {
			return fmt.Errorf("wgsl: logit bias token %d is outside the vocabulary [0, %d)", b.ID, V)
		}
		r.biasHost[b.ID] = b.Bias
		if b.Bans() {
			r.biasHost[b.ID] = deviceBan
		}
	}
	if err := r.bias.WriteF32(0, r.biasHost); err != nil {
		return err
	}
	r.biasSet = append(r.biasSet[:0], lb...)
	return nil
}

// SampleNext runs tokens like Forward and returns the next token picked on
// the GPU from the first vocab logits of the last token: the argmax when
// opt.Temperature is 0, else the token generate.Sampler.SampleDraw picks
// for the draw u (Device.Sample), after the logit bias (added on the GPU).
// Only the token id is read back; a repetition penalty is refused
// (SamplesOnDevice).
func (r *Runner) SampleNext(tokens []int, opt generate.SamplerOptions, vocab int, u float64) (int, error) {
	if err := r.deviceSampling(opt, vocab); err != nil {
		return 0, err
	}
	if err := r.setBias(opt.LogitBias); err != nil {
		return 0, err
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
	if err := r.deviceSampling(opt, vocab); err != nil {
		return 0, err
	}
	if err := r.setBias(opt.LogitBias); err != nil {
		return 0, err
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
	if err := r.d.Linear(r.logits.At(0), r.hiddenRow(T-1), 1, r.lmHead); err != nil {
		return 0, err
	}
	if len(opt.LogitBias) > 0 { // uploaded by setBias before the piece was recorded
		if err := r.d.Add(r.logits.At(0), r.logits.At(0), r.bias.At(0), vocab, 1); err != nil {
			return 0, err
		}
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
	if r.live.hook != nil {
		return r.sampledLive(T)
	}
	var id [1]uint32
	if err := r.d.ReadU32(r.outTok.At(0), id[:]); err != nil {
		return 0, err
	}
	return int(id[0]), nil
}
