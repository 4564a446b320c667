package model

import (
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/ref"
)

// Options tune a Runner.
type Options struct {
	// MaxChunk is the largest number of tokens one Forward call processes
	// (prefill runs in pieces of at most this size). Default 64.
	MaxChunk int
	// KDAChunk is the chunk size of the chunked (WY/UT) KDA form. Default 64.
	KDAChunk int
	// Workers is the number of CPU workers (0: GOMAXPROCS).
	Workers int
	// RecurrentPrefill makes multi-token pieces use the recurrent KDA form
	// and the absorbed MLA form instead of the chunked and naive forms (the
	// forms decode uses). For tests and measurements.
	RecurrentPrefill bool
}

// Trace, when set on a Runner, receives named activations of every Forward
// call: "layer_in", "mixer_out", "ffn_in", "ffn_out" per layer and
// "final_hidden" (layer −1), each [T, d] row-major. The slices are only
// valid during the call.
type Trace func(name string, layer int, data []float32, T int)

// Runner evaluates a Model on the CPU. It owns all scratch memory, sized
// once for Options.MaxChunk tokens, so decoding allocates nothing. A Runner
// serves one sequence at a time.
type Runner struct {
	M     *Model
	Opt   Options
	Trace Trace
	// RouteHook, when set, receives the routing of every MoE layer: for each
	// of the T tokens, K expert ids (experts[t·K+k]) and their weights.
	// The slices are only valid during the call.
	RouteHook func(layer int, experts []int, weights []float32, T, K int)
	// Profile, when set, accumulates time per op category.
	Profile *Profile

	pool *ref.Pool
	mla  ref.MLAScratch
	s    scratch
}

type scratch struct {
	emb, x, xn, mix, ffn []float32 // [T, d]
	part                 []float32 // AttnRes running partial sum p [T, d]
	blocks               [][]float32
	srcs                 [][]float32
	scores               []float32

	q, k, v, qc, kc, vc, g, gr, gate, o []float32 // KDA / MLA
	beta, fa, qa, kva                   []float32
	latent                              []float32 // [T, r_kv+dr] rows for the cache

	// FFN
	h1, h2, lat, racc, zrow, eout []float32
	router                        []float32
	logits                        []float32 // [T, E]
	idx                           []int     // [T, K]
	wts                           []float32 // [T, K]
	byExpert                      [][]int32 // token·K+slot per expert
	tokY                          []float32 // the shared experts' output [T, d]
	slotY                         []float32 // [T·K, w] routed experts' outputs by slot
	experts                       expertsJob
	workers                       []workerScratch // per pool worker (expertsJob)
	// one decoded token's experts, batched (moeDecode)
	dh1, dh2, dy []float32  // [K·I + I_shared], [K·w + d]
	gemvs        []ref.GEMV // the products of one batch
	order        []int      // slots in expert order
}

// workerScratch is one pool worker's scratch for the experts of a prefill
// piece: a one-thread pool (the experts run whole on one worker) and room
// for one expert's gathered rows and hidden activations.
type workerScratch struct {
	pool       *ref.Pool
	tx, h1, h2 []float32
}

// errDeferred is the CPU runner's answer for a model whose weights were
// left in the checkpoint (LoadDeferred).
var errDeferred = errors.New("forward: the model's weights were loaded deferred (for a GPU upload); load it with Load to run it on the CPU")

// NewRunner allocates a runner for m.
func NewRunner(m *Model, opt Options) *Runner {
	if opt.MaxChunk <= 0 {
		opt.MaxChunk = 64
	}
	if opt.KDAChunk <= 0 {
		opt.KDAChunk = 64
	}
	r := &Runner{M: m, Opt: opt, pool: ref.NewPool(opt.Workers)}
	c := m.Cfg
	T, d := opt.MaxChunk, c.HiddenSize
	f := func(n int) []float32 { return make([]float32, n) }
	s := &r.s
	s.emb, s.x, s.xn, s.mix, s.ffn, s.part = f(T*d), f(T*d), f(T*d), f(T*d), f(T*d), f(T*d)
	if S := c.AttnResBlockSize; S > 0 {
		nb := (c.NumHiddenLayers+S-1)/S + 1
		s.blocks = make([][]float32, nb)
		for i := range s.blocks {
			s.blocks[i] = f(T * d)
		}
		s.srcs = make([][]float32, 0, nb+1)
		s.scores = f(nb + 1)
	}
	hd := max(c.KDAHeads*c.KDAHeadDim, c.NumHeads*(c.QKNopeHeadDim+c.QKRopeHeadDim), c.NumHeads*c.VHeadDim)
	for _, p := range []*[]float32{&s.q, &s.k, &s.v, &s.qc, &s.kc, &s.vc, &s.g, &s.gr, &s.gate, &s.o} {
		*p = f(T * hd)
	}
	s.beta = f(T * c.KDAHeads)
	s.fa = f(T * max(c.KDAHeadDim, 1))
	s.qa = f(T * max(c.QLoraRank, 1))
	s.kva = f(T * (c.KVLoraRank + c.QKRopeHeadDim))
	s.latent = s.kva
	I := max(c.IntermediateSize, c.NumSharedExperts*c.MoEIntermediateSize, c.MoEIntermediateSize)
	s.h1, s.h2 = f(T*I), f(T*I)
	w := c.ExpertWidth()
	s.lat, s.racc = f(T*w), f(T*w)
	s.tokY = f(T * max(w, d))
	s.gemvs = make([]ref.GEMV, 0, max(2*c.TopK+2, 8)) // batched GEMVs of a decode step
	if c.NumExperts > 0 {
		s.router = f(2 * c.NumExperts)
		s.logits = f(T * c.NumExperts)
		s.idx = make([]int, T*c.TopK)
		s.wts = f(T * c.TopK)
		Ie, Ish := c.MoEIntermediateSize, c.NumSharedExperts*c.MoEIntermediateSize
		s.dh1, s.dh2 = f(c.TopK*Ie+Ish), f(c.TopK*Ie+Ish)
		s.dy = f(c.TopK*w + d)
		s.order = make([]int, c.TopK)
		s.byExpert = make([][]int32, c.NumExperts)
		for e := range s.byExpert {
			s.byExpert[e] = make([]int32, 0, T*c.TopK)
		}
		s.slotY = f(T * c.TopK * w)
		s.experts.experts = make([]int, 0, c.NumExperts)
		s.experts.start = make([]int, 0, c.NumExperts)
		s.workers = make([]workerScratch, r.pool.Workers())
		for i := range s.workers {
			s.workers[i] = workerScratch{pool: ref.NewPool(1), tx: f(T * w), h1: f(T * Ie), h2: f(T * Ie)}
		}
	}
	return r
}

// Close stops the runner's worker goroutines.
func (r *Runner) Close() { r.pool.Close() }

// Forward runs tokens (at most Options.MaxChunk) through the model starting
// at st.Pos, updating st. If logits is non-nil it receives the logits of the
// last token ([V]) or, when len(logits) ≥ T·V, of every token ([T, V]).
func (r *Runner) Forward(st *State, tokens []int, logits []float32) error {
	c := r.M.Cfg
	T, d := len(tokens), c.HiddenSize
	if T == 0 {
		return fmt.Errorf("forward: no tokens")
	}
	if r.M.Deferred {
		return errDeferred
	}
	if T > r.Opt.MaxChunk {
		return fmt.Errorf("forward: %d tokens exceed the runner's chunk of %d", T, r.Opt.MaxChunk)
	}
	if st.Pos+T > c.MaxPositions {
		return fmt.Errorf("forward: position %d exceeds the model's context of %d tokens", st.Pos+T, c.MaxPositions)
	}
	for i, id := range tokens {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("forward: token %d (index %d) is outside the vocabulary [0, %d)", id, i, c.VocabSize)
		}
	}
	s := &r.s
	emb := s.emb[:T*d]
	for t, id := range tokens {
		row := emb[t*d : (t+1)*d]
		copy(row, r.M.EmbedTokens.Row(id, row))
	}
	return r.forwardEmbedded(st, T, logits)
}

// ForwardEmbeddings is Forward for inputs given as embeddings ([T, d]); the
// vision path uses it to splice image features into the sequence.
func (r *Runner) ForwardEmbeddings(st *State, emb []float32, T int, logits []float32) error {
	if r.M.Deferred {
		return errDeferred
	}
	if T < 1 || T > r.Opt.MaxChunk {
		return fmt.Errorf("forward: %d tokens: want 1 to the runner's chunk of %d", T, r.Opt.MaxChunk)
	}
	if st.Pos+T > r.M.Cfg.MaxPositions {
		return fmt.Errorf("forward: position %d exceeds the model's context of %d tokens", st.Pos+T, r.M.Cfg.MaxPositions)
	}
	if len(emb) < T*r.M.Cfg.HiddenSize {
		return fmt.Errorf("forward: %d embedding values for %d tokens of width %d", len(emb), T, r.M.Cfg.HiddenSize)
	}
	copy(r.s.emb, emb[:T*r.M.Cfg.HiddenSize])
	return r.forwardEmbedded(st, T, logits)
}

func (r *Runner) trace(name string, layer int, data []float32, T int) {
	if r.Trace != nil {
		r.Trace(name, layer, data, T)
	}
}

func (r *Runner) forwardEmbedded(st *State, T int, logits []float32) error {
	if r.Profile != nil {
		start := time.Now()
		r.Profile.Calls++
		defer func() { r.Profile.Total += time.Since(start) }()
	}
	m, c, s := r.M, r.M.Cfg, &r.s
	d := c.HiddenSize
	eps := c.RMSNormEps
	x, xn, mix, ffn := s.x[:T*d], s.xn[:T*d], s.mix[:T*d], s.ffn[:T*d]
	attnRes := c.AttnResBlockSize > 0
	var final []float32
	if !attnRes {
		// Standard pre-norm residual stream: h += mixer(norm(h)); h += ffn(norm(h)).
		h := x
		copy(h, s.emb[:T*d])
		for i, l := range m.Layers {
			r.trace("layer_in", i, h, T)
			ref.RMSNorm(xn, h, l.InputLayernorm, eps)
			t0 := r.tick()
			r.mixer(st, i, l, xn, mix, T)
			r.tock(mixerOp(l.Kind), t0)
			r.trace("mixer_out", i, mix, T)
			add(h, mix)
			r.trace("ffn_in", i, h, T)
			ref.RMSNorm(xn, h, l.PostAttentionLayernorm, eps)
			t0 = r.tick()
			r.ffn(i, l, xn, ffn, T)
			r.tock(ffnOp(l), t0)
			r.trace("ffn_out", i, ffn, T)
			add(h, ffn)
		}
		final = h
	} else {
		// Block Attention Residuals (architecture.md §4.3): completed block
		// summaries R and the running partial sum p.
		S := c.AttnResBlockSize
		p := s.part[:T*d]
		copy(p, s.emb[:T*d])
		nb := 0
		havePart := true
		for i, l := range m.Layers {
			if nb > 0 {
				t0 := r.tick()
				r.attnRes(x, nb, p, havePart, l.SelfAttentionResProj, l.SelfAttentionResNorm, T)
				r.tock(OpAttnRes, t0)
			} else {
				copy(x, p)
			}
			if i%S == 0 {
				copy(s.blocks[nb][:T*d], p)
				nb++
				havePart = false
			}
			r.trace("layer_in", i, x, T)
			ref.RMSNorm(xn, x, l.InputLayernorm, eps)
			t0 := r.tick()
			r.mixer(st, i, l, xn, mix, T)
			r.tock(mixerOp(l.Kind), t0)
			r.trace("mixer_out", i, mix, T)
			if havePart {
				add(p, mix)
			} else {
				copy(p, mix)
				havePart = true
			}
			t0 = r.tick()
			r.attnRes(x, nb, p, true, l.MLPResProj, l.MLPResNorm, T)
			r.tock(OpAttnRes, t0)
			r.trace("ffn_in", i, x, T)
			ref.RMSNorm(xn, x, l.PostAttentionLayernorm, eps)
			t0 = r.tick()
			r.ffn(i, l, xn, ffn, T)
			r.tock(ffnOp(l), t0)
			r.trace("ffn_out", i, ffn, T)
			add(p, ffn)
		}
		t0 := r.tick()
		r.attnRes(x, nb, p, true, m.OutputAttnResProj, m.OutputAttnResNorm, T)
		r.tock(OpAttnRes, t0)
		final = x
	}
	t0 := r.tick()
	ref.RMSNorm(xn, final, m.Norm, eps)
	r.trace("final_hidden", -1, xn, T)
	st.Pos += T
	defer r.tock(OpLMHead, t0)
	if logits != nil {
		V := c.VocabSize
		if len(logits) >= T*V {
			ref.Linear(r.pool, logits, xn, T, m.LMHead)
		} else {
			ref.Linear(r.pool, logits, xn[(T-1)*d:], 1, m.LMHead)
		}
	}
	return nil
}

// attnRes writes, per token, AttnRes over the nb completed blocks plus (if
// withPart) the partial sum p into out.
func (r *Runner) attnRes(out []float32, nb int, p []float32, withPart bool, w, gamma []float32, T int) {
	s := &r.s
	d := r.M.Cfg.HiddenSize
	for t := 0; t < T; t++ {
		s.srcs = s.srcs[:0]
		for b := 0; b < nb; b++ {
			s.srcs = append(s.srcs, s.blocks[b][t*d:(t+1)*d])
		}
		if withPart {
			s.srcs = append(s.srcs, p[t*d:(t+1)*d])
		}
		ref.AttnRes(out[t*d:(t+1)*d], s.srcs, w, gamma, r.M.Cfg.RMSNormEps, s.scores)
	}
}

func add(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

func (r *Runner) mixer(st *State, i int, l *Layer, xn, out []float32, T int) {
	if l.Kind == config.KDA {
		r.kda(st.KDA[i], l.KDA, xn, out, T)
	} else {
		r.mlaForward(st, st.MLA[i], l.MLA, xn, out, T)
	}
}

// kda is one KDA mixer over T tokens (architecture.md §1.6):
// q,k,v projections → short conv + SiLU → L2-norm (q × dk^-1/2) →
// β = σ(b_proj x), g = gate(f_b(f_a x)) → delta rule → o_norm ⊙ σ(gate x) →
// o_proj.
func (r *Runner) kda(st *KDAState, w *KDA, xn, out []float32, T int) {
	c, s, p := r.M.Cfg, &r.s, r.pool
	H, dk, K := c.KDAHeads, c.KDAHeadDim, c.ConvKernel
	hd := H * dk
	q, k, v := s.q[:T*hd], s.k[:T*hd], s.v[:T*hd]
	qc, kc, vc := s.qc[:T*hd], s.kc[:T*hd], s.vc[:T*hd]
	beta, fa, g, gate := s.beta[:T*H], s.fa[:T*dk], s.g[:T*hd], s.gate[:T*hd]
	var ga []float32 // the low-rank output gate's first product
	if w.GProj == nil {
		ga = s.gr[:T*w.GAProj.Rows]
	}
	if T == 1 {
		// a decoded token: every projection of xn in one parallel region
		gs := append(s.gemvs[:0], ref.GEMV{W: w.QProj, X: xn, Out: q}, ref.GEMV{W: w.KProj, X: xn, Out: k},
			ref.GEMV{W: w.VProj, X: xn, Out: v}, ref.GEMV{W: w.BProj, X: xn, Out: beta}, ref.GEMV{W: w.FAProj, X: xn, Out: fa})
		if w.GProj != nil {
			gs = append(gs, ref.GEMV{W: w.GProj, X: xn, Out: gate})
		} else {
			gs = append(gs, ref.GEMV{W: w.GAProj, X: xn, Out: ga})
		}
		ref.LinearBatch(p, gs)
	} else {
		ref.Linear(p, q, xn, T, w.QProj)
		ref.Linear(p, k, xn, T, w.KProj)
		ref.Linear(p, v, xn, T, w.VProj)
		ref.Linear(p, beta, xn, T, w.BProj)
		ref.Linear(p, fa, xn, T, w.FAProj)
		if w.GProj != nil {
			ref.Linear(p, gate, xn, T, w.GProj)
		} else {
			ref.Linear(p, ga, xn, T, w.GAProj)
		}
	}
	ref.ShortConv(qc, q, w.QConv1d, st.ConvQ, T, hd, K)
	ref.ShortConv(kc, k, w.KConv1d, st.ConvK, T, hd, K)
	ref.ShortConv(vc, v, w.VConv1d, st.ConvV, T, hd, K)
	ref.L2Norm(qc, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	ref.L2Norm(kc, dk, 1e-6, 1)
	ref.Sigmoids(beta, beta)
	if T == 1 && w.GProj == nil { // the two second-stage products together
		ref.LinearBatch(p, append(s.gemvs[:0], ref.GEMV{W: w.FBProj, X: fa, Out: g}, ref.GEMV{W: w.GBProj, X: ga, Out: gate}))
	} else {
		ref.Linear(p, g, fa, T, w.FBProj)
		if w.GProj == nil {
			ref.Linear(p, gate, ga, T, w.GBProj)
		}
	}
	ref.KDAGate(g, g, w.DtBias, w.ALog, H, dk, c.GateBounded, c.GateLowerBound)
	o := s.o[:T*hd]
	a := ref.KDAArgs{T: T, H: H, DK: dk, DV: dk, Q: qc, K: kc, V: vc, G: g, Beta: beta, O: o, S: st.S}
	if T == 1 || r.Opt.RecurrentPrefill {
		ref.KDARecurrent(p, &a)
	} else {
		ref.KDAChunked(p, &a, r.Opt.KDAChunk)
	}
	ref.RMSNormGated(o, o, gate, w.ONorm, c.RMSNormEps, ref.GateSigmoid)
	ref.Linear(p, out, o, T, w.OProj)
}

// mlaForward is one gated MLA mixer over T tokens (architecture.md §2):
// the latent [kv_a_layernorm(c_kv); k_r] of every token is appended to the
// cache, then the queries attend over the whole cache (naive form for
// multi-token pieces, absorbed form for decode), the output is gated by
// σ(g_proj x) when enabled, then o_proj.
func (r *Runner) mlaForward(st *State, cache *ref.LatentCache, w *MLA, xn, out []float32, T int) {
	c, s, p := r.M.Cfg, &r.s, r.pool
	H, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	q, qa := s.q[:T*H*(dn+dr)], s.qa[:T*max(c.QLoraRank, 0)]
	kva, gate := s.kva[:T*(rkv+dr)], s.gate[:T*H*dv]
	if T == 1 { // a decoded token: the projections of xn in one parallel region
		gs := append(s.gemvs[:0], ref.GEMV{W: w.KVAProjWithMQA, X: xn, Out: kva})
		if w.QProj != nil {
			gs = append(gs, ref.GEMV{W: w.QProj, X: xn, Out: q})
		} else {
			gs = append(gs, ref.GEMV{W: w.QAProj, X: xn, Out: qa})
		}
		if w.GProj != nil {
			gs = append(gs, ref.GEMV{W: w.GProj, X: xn, Out: gate})
		}
		ref.LinearBatch(p, gs)
	} else {
		if w.QProj != nil {
			ref.Linear(p, q, xn, T, w.QProj)
		} else {
			ref.Linear(p, qa, xn, T, w.QAProj)
		}
		ref.Linear(p, kva, xn, T, w.KVAProjWithMQA)
		if w.GProj != nil {
			ref.Linear(p, gate, xn, T, w.GProj)
		}
	}
	if w.QProj == nil {
		ref.RMSNorm(qa, qa, w.QALayernorm, c.RMSNormEps)
		ref.Linear(p, q, qa, T, w.QBProj)
	}
	for t := 0; t < T; t++ {
		row := kva[t*(rkv+dr):][:rkv]
		ref.RMSNorm(row, row, w.KVALayernorm, c.RMSNormEps)
	}
	pos0 := cache.Len()
	cache.Append(kva)
	o := s.o[:T*H*dv]
	a := ref.MLAArgs{N: T, H: H, DN: dn, DR: dr, DV: dv, RKV: rkv, Pos0: pos0,
		Scale: float32(1 / math.Sqrt(float64(dn+dr))), Q: q, WKVB: w.KVBProj, Cache: cache, O: o}
	if T == 1 || r.Opt.RecurrentPrefill {
		ref.MLAAbsorbed(p, &a, &r.mla)
	} else {
		ref.MLANaive(p, &a, &r.mla)
	}
	if w.GProj != nil {
		ref.Sigmoids(gate, gate) // gate is scratch of this layer
		for i, gv := range gate {
			o[i] *= gv
		}
	}
	ref.Linear(p, out, o, T, w.OProj)
}

// Workers is the number of CPU workers the runner uses.
func (r *Runner) Workers() int { return r.pool.Workers() }

// Pool is the runner's worker pool (for work done beside the LM, such as
// encoding images with the vision tower).
func (r *Runner) Pool() *ref.Pool { return r.pool }
