// Package engine is the platform-independent half of tessera's browser
// build: it loads a model from an Opener (bytes a browser fetched, or files
// on disk in tests), generates with streaming callbacks, cancellation and
// timing, and describes the model. The GOOS=js entry point in package main
// of ../ (wasm/) wraps it in Promise-returning JavaScript exports; keeping
// the logic here lets native tests check that the browser path yields
// exactly the tokens of `tessera run --backend cpu`.
//
// The model runs on a Runner. Today that is the CPU reference compiled to
// WebAssembly (NewCPURunner); the WebGPU runner of package wgsl plugs in
// through the same Runner interface once it runs whole models in the
// browser.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// Files the engine reads from a model directory, besides the checkpoint.
const (
	ConfigFile    = "config.json"
	TokenizerFile = "tokenizer.json"
)

// Runner generates tokens for one sequence at a time. NewCPURunner gives
// the CPU reference; a GPU runner wraps a generate.Backend (see
// BackendRunner) and must yield the same greedy tokens.
type Runner interface {
	// Generate yields sampled tokens for prompt as generate.Session does;
	// the error, if any, comes last with token −1.
	Generate(prompt []int, opt generate.Options) func(yield func(int, error) bool)
	// Close frees what the runner allocated for this generation.
	Close()
}

// Engine is a loaded model with its tokenizer. It runs one generation at a
// time: Generate returns an error while another is in progress.
type Engine struct {
	Cfg   *config.Config
	Model *model.Model
	ck    *safetensors.Checkpoint
	codec tokenizer.Codec
	// NewRunner makes the runner of one generation with room for
	// maxContext tokens; NewCPURunner by default.
	NewRunner func(m *model.Model, maxContext int) (Runner, error)
	// Backend names where the model runs.
	Backend string
	// OnClose, if set, is called by Close (a GPU runner frees its device).
	OnClose    func()
	busy       chan struct{}
	tokFile    string
	weightSize int64
}

// Load reads config.json, the tokenizer (tokenizer.json when open finds
// it, else byte ids) and the safetensors checkpoint through open, and
// binds the model. Names passed to open are relative to the model
// directory; a missing file must give an error wrapping fs.ErrNotExist.
func Load(open safetensors.Opener) (*Engine, error) {
	raw, err := readFile(open, ConfigFile, 16<<20)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("model has no %s (is the model URL right?): %w", ConfigFile, err)
		}
		return nil, err
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	e := &Engine{Cfg: cfg, busy: make(chan struct{}, 1), NewRunner: NewCPURunner, Backend: CPUBackend}
	tj, err := readFile(open, TokenizerFile, 1<<30)
	switch {
	case err == nil:
		t, err := tokenizer.FromJSON(tj)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", TokenizerFile, err)
		}
		if t.Vocab() > cfg.VocabSize {
			return nil, fmt.Errorf("%s has %d tokens but the model's vocab_size is %d", TokenizerFile, t.Vocab(), cfg.VocabSize)
		}
		e.codec, e.tokFile = tokenizer.NewCodec(t, TokenizerFile), TokenizerFile
	case errors.Is(err, fs.ErrNotExist):
		e.codec, e.tokFile = tokenizer.ByteCodec{VocabSize: cfg.VocabSize}, "none (byte ids)"
	default:
		return nil, err
	}
	ck, err := safetensors.Open(open)
	if err != nil {
		return nil, err
	}
	m, err := model.Load(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, err
	}
	for _, f := range ck.Files() {
		for _, t := range f.Tensors {
			e.weightSize += t.Size
		}
	}
	e.Model, e.ck = m, ck
	return e, nil
}

// readFile reads a whole file through open, refusing more than limit bytes.
func readFile(open safetensors.Opener, name string, limit int64) ([]byte, error) {
	src, err := open(name)
	if err != nil {
		return nil, err
	}
	if src == nil {
		return nil, fmt.Errorf("%s: opener returned no source and no error", name)
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	n := src.Size()
	if n < 0 || n > limit {
		return nil, fmt.Errorf("%s: size %d bytes is outside 0…%d", name, n, limit)
	}
	b := make([]byte, n)
	if _, err := src.ReadAt(b, 0); err != nil && !(errors.Is(err, io.EOF) && n == 0) {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return b, nil
}

// Close frees the model's checkpoint. The engine must not be used after.
func (e *Engine) Close() error {
	if e.OnClose != nil {
		e.OnClose()
		e.OnClose = nil
	}
	if e.ck == nil {
		return nil
	}
	err := e.ck.Close()
	e.ck, e.Model = nil, nil
	return err
}

// Options configure one generation.
type Options struct {
	// Prompt is text encoded with the model's tokenizer; Tokens, when not
	// empty, are used instead.
	Prompt    string
	Tokens    []int
	MaxTokens int // new tokens at most (> 0)
	Sampler   generate.SamplerOptions
}

// Piece is one generated token with the text it completes (empty while a
// UTF-8 character is split across tokens).
type Piece struct {
	ID   int
	Text string
}

// Stats describe a finished generation.
type Stats struct {
	PromptTokens int     `json:"promptTokens"`
	Tokens       int     `json:"tokens"`
	TTFTMs       float64 `json:"ttftMs"`        // prompt given → first token sampled
	DecodeTokS   float64 `json:"decodeTokPerS"` // tokens after the first per second
	TotalMs      float64 `json:"totalMs"`
	Stopped      string  `json:"stopped"`    // "length", "stop", "cancelled" or "context"
	Tail         string  `json:"tail"`       // text held back at the end (flushed)
	StateBytes   int64   `json:"stateBytes"` // KDA state + MLA cache of the sequence at the end
}

// ErrBusy reports a Generate call while another generation runs.
var ErrBusy = errors.New("a generation is already running on this engine; wait for it or cancel it")

// Generate encodes the prompt and generates, calling emit for every token.
// It stops at a stop token (config eos_token_id), MaxTokens, the end of
// the context, when ctx is cancelled, or when emit returns false. Sampling
// is restricted to ids the tokenizer knows, as in `tessera run`.
func (e *Engine) Generate(ctx context.Context, opt Options, emit func(Piece) bool) (Stats, error) {
	var st Stats
	if e.Model == nil {
		return st, errors.New("the engine was disposed; load the model again")
	}
	select {
	case e.busy <- struct{}{}:
		defer func() { <-e.busy }()
	default:
		return st, ErrBusy
	}
	if opt.MaxTokens <= 0 {
		return st, fmt.Errorf("maxTokens must be > 0, got %d", opt.MaxTokens)
	}
	if err := opt.Sampler.Validate(); err != nil {
		return st, err
	}
	ids := opt.Tokens
	if len(ids) == 0 {
		if opt.Prompt == "" {
			return st, errors.New("empty prompt: give prompt text or token ids")
		}
		var err error
		if ids, err = e.codec.Encode(opt.Prompt); err != nil {
			return st, err
		}
	}
	for i, id := range ids {
		if id < 0 || id >= e.Cfg.VocabSize {
			return st, fmt.Errorf("prompt token %d at position %d is outside the vocabulary [0, %d)", id, i, e.Cfg.VocabSize)
		}
	}
	if len(ids) >= e.Cfg.MaxPositions {
		return st, fmt.Errorf("prompt of %d tokens does not fit the model's context of %d", len(ids), e.Cfg.MaxPositions)
	}
	st.PromptTokens = len(ids)
	r, err := e.NewRunner(e.Model, len(ids)+opt.MaxTokens)
	if err != nil {
		return st, err
	}
	defer r.Close()
	stream := e.codec.Stream()
	t0 := time.Now()
	var tFirst time.Time
	st.Stopped = "stop"
	gopt := generate.Options{Sampler: opt.Sampler, MaxTokens: opt.MaxTokens, Stop: e.Cfg.EOSTokenIDs, Vocab: e.codec.Vocab()}
	for tok, err := range r.Generate(ids, gopt) {
		if err != nil {
			return st, err
		}
		if st.Tokens == 0 {
			tFirst = time.Now()
			st.TTFTMs = ms(tFirst.Sub(t0))
		}
		st.Tokens++
		piece, err := stream.Add(tok)
		if err != nil {
			return st, err
		}
		if !emit(Piece{ID: tok, Text: piece}) || ctx.Err() != nil {
			st.Stopped = "cancelled"
			break
		}
	}
	end := time.Now()
	if st.Stopped != "cancelled" {
		switch {
		case st.Tokens >= opt.MaxTokens:
			st.Stopped = "length"
		case st.PromptTokens+st.Tokens >= e.Cfg.MaxPositions:
			st.Stopped = "context"
		}
	}
	st.Tail = stream.Flush()
	st.TotalMs = ms(end.Sub(t0))
	if st.Tokens > 1 {
		st.DecodeTokS = float64(st.Tokens-1) / end.Sub(tFirst).Seconds()
	}
	s := model.ComputeStats(e.Cfg)
	st.StateBytes = s.KDAStateBytes + s.CacheBytesPerTok*int64(st.PromptTokens+st.Tokens)
	return st, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Info describes the loaded model for engine.info().
type Info struct {
	Summary          string `json:"summary"`
	Layout           string `json:"layout"`
	Backend          string `json:"backend"`
	ParamsTotal      int64  `json:"paramsTotal"`
	ParamsActive     int64  `json:"paramsActive"`
	WeightBytes      int64  `json:"weightBytes"`
	StateBytes       int64  `json:"stateBytes"`       // KDA states + conv tails, constant in context
	CacheBytesPerTok int64  `json:"cacheBytesPerTok"` // MLA latent cache per token
	VocabSize        int    `json:"vocabSize"`
	Layers           int    `json:"layers"`
	HiddenSize       int    `json:"hiddenSize"`
	Experts          int    `json:"experts"`
	ExpertsActive    int    `json:"expertsActive"`
	Context          int    `json:"context"`
	Tokenizer        string `json:"tokenizer"`
	Vision           bool   `json:"vision"` // image input available (not yet)
}

// Info describes the model.
func (e *Engine) Info() Info {
	c := e.Cfg
	s := model.ComputeStats(c)
	return Info{
		Summary: c.Summary(), Layout: c.Layout.String(), Backend: e.Backend,
		ParamsTotal: s.TotalParams, ParamsActive: s.ActiveParams, WeightBytes: e.weightSize,
		StateBytes: s.KDAStateBytes, CacheBytesPerTok: s.CacheBytesPerTok,
		VocabSize: c.VocabSize, Layers: c.NumHiddenLayers, HiddenSize: c.HiddenSize,
		Experts: c.NumExperts, ExpertsActive: c.TopK, Context: c.MaxPositions, Tokenizer: e.tokFile,
	}
}

// CPUBackend is the Backend of the CPU runner compiled to WebAssembly.
const CPUBackend = "cpu (wasm)"

// sessionRunner generates through a generate.Session.
type sessionRunner struct {
	s     *generate.Session
	close func()
}

func (r *sessionRunner) Generate(prompt []int, opt generate.Options) func(yield func(int, error) bool) {
	return r.s.Generate(prompt, opt)
}

func (r *sessionRunner) Close() {
	if r.close != nil {
		r.close()
	}
}

// NewCPURunner returns the CPU reference runner with room for maxContext
// tokens. The prefill piece size is 64 tokens, as `tessera run` uses by
// default.
func NewCPURunner(m *model.Model, maxContext int) (Runner, error) {
	r := model.NewRunner(m, model.Options{MaxChunk: 64})
	return &sessionRunner{s: generate.NewSession(r, maxContext), close: r.Close}, nil
}

// BackendRunner returns a Runner over b, a backend that lives as long as
// the engine (a GPU runner with its weights uploaded once): it resets b's
// sequence and starts a session on it. Close leaves b open.
func BackendRunner(b generate.Backend, maxContext int) (Runner, error) {
	if err := b.Reset(); err != nil {
		return nil, err
	}
	return &sessionRunner{s: generate.NewSessionOn(b, maxContext)}, nil
}
