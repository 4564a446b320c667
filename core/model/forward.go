package model

import (
	"errors"
	"fmt"
	"time"

	"github.com/tessera-llm/tessera/core/cpu"
	"github.com/tessera-llm/tessera/core/nn"
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

// Runner evaluates a Model on the CPU: the family's forward pass (k3.go)
// over the CPU backend (cpu.go). It owns all scratch memory, sized once
// for Options.MaxChunk tokens, so decoding allocates nothing. A Runner
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

	b     *cpuBackend
	graph nn.Graph
}

// scratch is the CPU backend's own working memory (the MoE op's).
type scratch struct {
	ffn, tokY []float32 // [T, d]
	eout      []float32 // one expert's output row

	h1, h2, lat, racc []float32
	router            []float32
	logits            []float32 // [T, E]
	idx               []int     // [T, K]
	wts               []float32 // [T, K]
	byExpert          [][]int32 // token·K+slot per expert
	slotY             []float32 // [T·K, w] routed experts' outputs by slot
	experts           expertsJob
	workers           []workerScratch // per pool worker (expertsJob)
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
	r := &Runner{M: m, Opt: opt}
	b := &cpuBackend{Backend: cpu.New(ref.NewPool(opt.Workers), cpu.Options{KDAChunk: opt.KDAChunk, Recurrent: opt.RecurrentPrefill}), r: r}
	r.b = b
	c := m.Cfg
	T, d := opt.MaxChunk, c.HiddenSize
	f := func(n int) []float32 { return make([]float32, n) }
	s := &b.s
	I := max(c.IntermediateSize, c.NumSharedExperts*c.MoEIntermediateSize, c.MoEIntermediateSize, c.SharedExpertIntermediateSize)
	s.h1, s.h2 = f(T*I), f(T*I)
	w := c.ExpertWidth()
	s.ffn = f(T * d)
	s.lat, s.racc = f(T*w), f(T*w)
	s.tokY = f(T * max(w, d))
	s.eout = f(max(w, d))
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
		s.workers = make([]workerScratch, b.Pool.Workers())
		for i := range s.workers {
			s.workers[i] = workerScratch{pool: ref.NewPool(1), tx: f(T * w), h1: f(T * Ie), h2: f(T * Ie)}
		}
	}
	r.graph = m.Build(b, T)
	return r
}

// Close stops the runner's worker goroutines.
func (r *Runner) Close() { r.b.Pool.Close() }

// Forward runs tokens (at most Options.MaxChunk) through the model starting
// at st.Pos(), updating st. If logits is non-nil it receives the logits of
// the last token ([V]) or, when len(logits) ≥ T·V, of every token ([T, V]).
func (r *Runner) Forward(st *State, tokens []int, logits []float32) error {
	c := r.M.Cfg
	T := len(tokens)
	if err := r.check(st, T); err != nil {
		return err
	}
	for i, id := range tokens {
		if id < 0 || id >= c.VocabSize {
			return fmt.Errorf("forward: token %d (index %d) is outside the vocabulary [0, %d)", id, i, c.VocabSize)
		}
	}
	return r.forward(st, nn.Input{IDs: tokens}, T, logits)
}

func (r *Runner) check(st *State, T int) error {
	if r.M.Deferred {
		return errDeferred
	}
	if T < 1 {
		return fmt.Errorf("forward: no tokens")
	}
	if T > r.Opt.MaxChunk {
		return fmt.Errorf("forward: %d tokens exceed the runner's chunk of %d", T, r.Opt.MaxChunk)
	}
	if st.N+T > r.M.Cfg.MaxPositions {
		return fmt.Errorf("forward: position %d exceeds the model's context of %d tokens", st.N+T, r.M.Cfg.MaxPositions)
	}
	return nil
}

// ForwardEmbeddings is Forward for inputs given as embeddings ([T, d]); the
// vision path uses it to splice image features into the sequence.
func (r *Runner) ForwardEmbeddings(st *State, emb []float32, T int, logits []float32) error {
	if err := r.check(st, T); err != nil {
		return err
	}
	if len(emb) < T*r.M.Cfg.HiddenSize {
		return fmt.Errorf("forward: %d embedding values for %d tokens of width %d", len(emb), T, r.M.Cfg.HiddenSize)
	}
	return r.forward(st, nn.Input{Emb: emb}, T, logits)
}

func (r *Runner) forward(st *State, in nn.Input, T int, logits []float32) error {
	if r.Profile != nil {
		start := time.Now()
		r.Profile.Calls++
		defer func() { r.Profile.Total += time.Since(start) }()
	}
	b := r.b
	b.Begin()
	defer b.End()
	hidden := r.graph.Forward(st, in, T)
	if err := b.Err(); err != nil {
		return err
	}
	if logits == nil {
		return nil
	}
	t0 := nn.Tick(b)
	defer nn.Tock(b, nn.OpLMHead, t0)
	V := r.M.Cfg.VocabSize
	if len(logits) >= T*V {
		b.Linear(b.Slice(logits[:T*V], V), hidden, T, r.M.LMHead)
	} else {
		b.Linear(b.Slice(logits[:V], V), b.Rows(hidden, T-1), 1, r.M.LMHead)
	}
	return nil
}

// Workers is the number of CPU workers the runner uses.
func (r *Runner) Workers() int { return r.b.Pool.Workers() }

// Pool is the runner's worker pool (for work done beside the LM, such as
// encoding images with the vision tower).
func (r *Runner) Pool() *ref.Pool { return r.b.Pool }
