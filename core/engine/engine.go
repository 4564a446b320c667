// Package engine is what every tessera front end runs a model through —
// the CLI (run, chat, serve and its OpenAI-compatible API), the desktop app
// and the browser build. It opens a model (from a directory, or from bytes
// a browser fetched), chooses the backend (cpu, gpu, or auto with a
// fallback and the reason), checks host and GPU memory, holds a pool of
// sequences, renders chat messages with the chat template, fuses images
// into the prompt, streams tokens with cancellation, constrains output
// with a grammar, reuses the state of earlier prompts (prefix cache),
// saves and restores conversations, and reports what a generation cost.
//
// One generation runs on one sequence (a generate.Session); Options.Parallel
// sequences run at once on the CPU, one on the GPU (its runner keeps the
// state on the device).
package engine

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"slices"
	"sync"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/digest"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"github.com/tessera-llm/tessera/wgsl"
)

// Files the engine reads from a model directory, besides the checkpoint.
const (
	ConfigFile    = "config.json"
	TokenizerFile = "tokenizer.json"
)

// Engine is a loaded model with its tokenizer and sequences.
type Engine struct {
	Cfg   *config.Config
	Model *model.Model
	ck    *safetensors.Checkpoint
	codec tokenizer.Codec
	chat  *chat.Renderer
	// NewSequence makes (or takes from a pool) the sequence of one
	// generation with room for maxContext tokens and returns the function
	// that gives it back; the CPU pool by default (see Parallel).
	NewSequence func(m *model.Model, maxContext int) (*generate.Session, func(), error)
	// NewEncoder returns the vision encoder of one generation with images
	// and a function that frees what it allocated (may be nil);
	// NewCPUEncoder by default.
	NewEncoder func(m *model.Model) (generate.Encoder, func(), error)
	// Backend names where the model runs (and why, after a fallback).
	Backend string
	// OnClose, if set, is called by Close (a GPU runner frees its device).
	OnClose func()
	// Wait makes Generate wait for a free sequence; without it a Generate
	// while every sequence is busy fails with ErrBusy (the browser's
	// one-generation-at-a-time contract).
	Wait bool
	// Cache reuses the state of earlier prompts; nil disables it.
	Cache *PrefixCache
	// Chunk is the CPU runner's prefill piece size (tokens).
	Chunk int
	// GPU and Dev are the native WebGPU runner and its device when the
	// model runs there (Open with backend gpu or auto), else nil.
	GPU *wgsl.Runner
	Dev *wgsl.Device
	// ExpertStats, when the model runs on a GPU runner, reads its
	// routed-expert cache's counters (Stats.ExpertCache); nil on the CPU.
	ExpertStats func() wgsl.ExpertStats
	// GPUMemory, when the model runs on a GPU runner, reports what it
	// holds there (Info.GPUMemory; GPUMemoryOf); nil on the CPU.
	GPUMemory func() *GPUMemoryUse
	// GPUStep, when the model runs on a GPU runner, describes its last
	// step (Stats.DispatchesPerToken); nil on the CPU.
	GPUStep func() wgsl.RunnerStats
	// CPUFallback: a GPU step that fails mid-generation (a device out of
	// memory while uploading experts, a lost device) moves the engine to
	// the CPU and the generation goes on there, keeping the tokens
	// generated so far (set under backend auto).
	CPUFallback bool

	identity   [32]byte
	tokFile    string
	weightSize int64
	sem        chan struct{} // one slot per sequence that may run at once
	pool       chan *cpuSeq  // idle CPU sequences
	allMu      sync.Mutex
	all        []*cpuSeq
	counters   counters
	tableOnce  sync.Once
	table      *grammar.Tokens
}

// cpuSeq is one pooled CPU runner with its session.
type cpuSeq struct {
	r *model.Runner
	s *generate.Session
}

// Load reads a model through open — config.json, tokenizer.json (optional:
// byte ids without it) and the safetensors checkpoint — for the CPU.
func Load(open safetensors.Opener) (*Engine, error) { return load(open, false) }

// LoadDeferred is Load without reading the weight matrices into memory
// (model.LoadDeferred) for a GPU runner to upload one at a time: the wasm
// heap then never holds the whole model. Such an engine runs only once
// its NewSequence is a GPU runner's (the CPU runner refuses the model).
func LoadDeferred(open safetensors.Opener) (*Engine, error) { return load(open, true) }

func load(open safetensors.Opener, deferred bool) (*Engine, error) {
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
	var codec tokenizer.Codec
	tokFile := ""
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
		codec, tokFile = tokenizer.NewCodec(t, TokenizerFile), TokenizerFile
	case errors.Is(err, fs.ErrNotExist):
		codec, tokFile = tokenizer.ByteCodec{VocabSize: cfg.VocabSize}, "none (byte ids)"
	default:
		return nil, err
	}
	ck, err := safetensors.Open(open)
	if err != nil {
		return nil, err
	}
	ld := model.Load
	if deferred {
		ld = model.LoadDeferred
	}
	m, err := ld(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, err
	}
	rd, err := chat.Load(func(name string) ([]byte, error) { return readFile(open, name, 16<<20) })
	if err != nil {
		ck.Close()
		return nil, err
	}
	e := newEngine(m, ck, codec, raw)
	e.tokFile, e.chat = tokFile, rd
	return e, nil
}

// LoadGGUF loads a GGUF model file held in src — in the browser, the
// bytes the page fetched and checked against its manifest — as Open loads
// a .gguf path natively (the same loader, fromGGUF): llama.cpp's kimi-k3 /
// kimi-linear layout, its vocabulary and chat template. deferred is
// LoadDeferred's (weights read later by a GPU runner). A malformed or
// truncated file is an error naming what is wrong (gguf.FormatError).
func LoadGGUF(src safetensors.Source, deferred bool) (*Engine, error) {
	f, err := gguf.Parse(src, src.Size(), gguf.Limits{})
	if err != nil {
		return nil, err
	}
	return fromGGUF(f, deferred)
}

// fromGGUF builds the engine of a parsed GGUF file: the model
// (gguf.LoadModel, which takes over f's source), the codec of its
// vocabulary (gguf.Codec) and its chat template (chat.FromGGUF).
func fromGGUF(f *gguf.File, deferred bool) (*Engine, error) {
	rd, err := chat.FromGGUF(f.Get)
	if err != nil {
		f.Close()
		return nil, err
	}
	m, ck, err := gguf.LoadModel(f, deferred)
	if err != nil {
		return nil, err
	}
	codec, err := gguf.Codec(f, m.Cfg.VocabSize)
	if err != nil {
		ck.Close()
		return nil, err
	}
	raw, err := json.Marshal(m.Cfg) // the configuration as parsed (the session identity hashes it)
	if err != nil {
		ck.Close()
		return nil, err
	}
	e := newEngine(m, ck, codec, raw)
	e.chat = rd
	return e, nil
}

// newEngine wraps a loaded model on the CPU with one sequence.
func newEngine(m *model.Model, ck *safetensors.Checkpoint, codec tokenizer.Codec, rawConfig []byte) *Engine {
	e := &Engine{Cfg: m.Cfg, Model: m, ck: ck, codec: codec, chat: chat.Builtin(), Backend: CPUBackend, Chunk: 64, tokFile: codec.Name()}
	e.NewSequence, e.NewEncoder = e.cpuSequence, NewCPUEncoder
	e.SetParallel(1)
	e.identity = identity(rawConfig, ck)
	for _, n := range ck.Names() { // every tensor, a GGUF file's (which has no safetensors files) too
		t, _ := ck.Tensor(n)
		e.weightSize += t.Size
	}
	return e
}

// identity hashes what makes a model this model for saved state: its
// configuration and its checkpoint's tensor index (names, types, shapes,
// sizes and offsets); a saved conversation restores only on a model with
// the same identity.
func identity(rawConfig []byte, ck *safetensors.Checkpoint) [32]byte {
	h := digest.New()
	h.Write(rawConfig)
	for _, n := range ck.Names() { // sorted; a GGUF file's tensors too
		t, _ := ck.Tensor(n)
		fmt.Fprintf(h, "%s|%s|%v|%d|%d\n", n, t.DType, t.Shape, t.Size, t.Offset)
	}
	var id [32]byte
	copy(id[:], h.Sum(nil))
	return id
}

// Identity is the model's identity hash (see SaveConversation).
func (e *Engine) Identity() [32]byte { return e.identity }

// Codec is the model's text codec.
func (e *Engine) Codec() tokenizer.Codec { return e.codec }

// SetParallel sets how many generations may run at once (n ≥ 1); the GPU
// backends keep 1. Call it before generating.
func (e *Engine) SetParallel(n int) {
	e.sem = make(chan struct{}, max(1, n))
	e.pool = make(chan *cpuSeq, max(1, n))
}

// Parallel is how many generations may run at once.
func (e *Engine) Parallel() int { return cap(e.sem) }

// cpuSequence takes an idle CPU sequence or makes one.
func (e *Engine) cpuSequence(m *model.Model, maxContext int) (*generate.Session, func(), error) {
	if m.Deferred {
		return nil, nil, errors.New("the weights were not loaded for the CPU (deferred for a GPU upload)")
	}
	var q *cpuSeq
	select {
	case q = <-e.pool:
	default:
		r := model.NewRunner(m, model.Options{MaxChunk: e.Chunk})
		q = &cpuSeq{r: r, s: generate.NewSession(r, min(maxContext, 1<<16))}
		e.allMu.Lock()
		e.all = append(e.all, q)
		e.allMu.Unlock()
	}
	return q.s, func() {
		select {
		case e.pool <- q:
		default: // the pool shrank (SetParallel): drop this one
			e.allMu.Lock()
			e.all = slices.DeleteFunc(e.all, func(x *cpuSeq) bool { return x == q })
			e.allMu.Unlock()
			q.r.Close()
		}
	}, nil
}

// UseCPU moves the engine back to the CPU runner (after the GPU device was
// lost): it frees the GPU side (OnClose), loads every weight matrix from the
// checkpoint when the model was deferred, and notes reason in Backend.
func (e *Engine) UseCPU(reason string) error {
	if e.ck == nil {
		return errors.New("the engine is closed")
	}
	if e.OnClose != nil {
		e.OnClose()
		e.OnClose = nil
	}
	if e.Model.Deferred {
		m, err := model.Load(e.Cfg, e.ck)
		if err != nil {
			return fmt.Errorf("loading the weights for the CPU: %w", err)
		}
		e.Model = m
	}
	e.NewSequence, e.NewEncoder = e.cpuSequence, NewCPUEncoder
	e.Backend = CPUBackend + "; " + reason
	return nil
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

// Close frees the model's checkpoint and runners. The engine must not be
// used after.
func (e *Engine) Close() error {
	if e.OnClose != nil {
		e.OnClose()
		e.OnClose = nil
	}
	e.allMu.Lock()
	for _, q := range e.all {
		q.r.Close()
	}
	e.all = nil
	e.allMu.Unlock()
	if e.ck == nil {
		return nil
	}
	err := e.ck.Close()
	e.ck, e.Model = nil, nil
	return err
}

// ErrBusy reports a Generate call while every sequence is busy (and Wait
// is not set).
var ErrBusy = errors.New("a generation is already running on this engine; wait for it or cancel it")

// acquire takes a slot to run one generation.
func (e *Engine) acquire(ctx context.Context) (func(), error) {
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem }, nil
	default:
	}
	if !e.Wait {
		return nil, ErrBusy
	}
	select {
	case e.sem <- struct{}{}:
		return func() { <-e.sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

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
	// Vision: the model takes images (it has a vision tower).
	Vision bool `json:"vision"`
	// ImageTokens: what images cost in the prompt, for a vision model.
	ImageTokens *ImageTokens `json:"imageTokens,omitempty"`
	// WeightsDeferred: the weight matrices were uploaded to the GPU one at
	// a time from the fetched files, never all held in the wasm heap.
	WeightsDeferred bool `json:"weightsDeferred"`
	// ExpertCache: when the GPU streams routed experts (a GPU memory
	// budget below the model), its cache's counters since the model was
	// loaded: slots per layer, hit rate, bytes and time uploaded.
	ExpertCache *ExpertCacheStats `json:"expertCache,omitempty"`
	// GPUMemory: what the model holds on the GPU, when it runs there.
	GPUMemory *GPUMemoryUse `json:"gpuMemory,omitempty"`
}

// GPUMemoryUse is the GPU memory a model's runner holds, in bytes
// (GPUMemoryOf).
type GPUMemoryUse struct {
	// Bytes: every buffer the runner allocated (Weights + State + Scratch
	// within a few percent).
	Bytes int64 `json:"bytes"`
	// Weights resident on the GPU, as uploaded (block formats in their
	// blocks, so about the file's size; BF16/F16 at 2 bytes, F32 vectors):
	// under a budget the dense part and the expert slots.
	Weights int64 `json:"weights"`
	// ModelWeights: all of the model's weights as the GPU keeps them
	// (Weights when no expert streams or runs on the CPU).
	ModelWeights int64 `json:"modelWeights"`
	// State: KDA states and conv tails, MLA latent caches for Context
	// tokens; Scratch: activations and attention scratch.
	State   int64 `json:"state"`
	Scratch int64 `json:"scratch"`
	Context int   `json:"context"`
	// ExpertBytes is one routed expert's size on the GPU (0 without);
	// ExpertSlots of each MoE layer's Experts are resident.
	ExpertBytes int64 `json:"expertBytes,omitempty"`
	ExpertSlots int   `json:"expertSlots,omitempty"`
	Experts     int   `json:"experts,omitempty"`
}

// ImageTokens gives the prompt tokens of a sample image size and the
// bounds of the smart resize, so a page can tell users what an image
// costs.
type ImageTokens struct {
	SampleWidth  int `json:"sampleWidth"`
	SampleHeight int `json:"sampleHeight"`
	Sample       int `json:"sample"` // tokens of a SampleWidth×SampleHeight image
	Max          int `json:"max"`    // tokens of the largest image after resizing (max_pixels)
	PatchSize    int `json:"patchSize"`
	MinPixels    int `json:"minPixels"`
	MaxPixels    int `json:"maxPixels"`
}

// SampleImage is the side of the square image Info reports the token
// count of (as `tessera inspect` does).
const SampleImage = 448

// imageTokens describes the image cost of a vision model, nil without one.
func (e *Engine) imageTokens() *ImageTokens {
	if e.Model == nil || e.Model.VisionCfg == nil {
		return nil
	}
	v := e.Model.VisionCfg
	t := &ImageTokens{SampleWidth: SampleImage, SampleHeight: SampleImage, PatchSize: v.PatchSize, MinPixels: v.MinPixels, MaxPixels: v.MaxPixels}
	t.Sample, _ = v.TokensPerImage(SampleImage, SampleImage)
	// The largest grid: a square image far over max_pixels.
	side := max(SampleImage, 4*int(math.Sqrt(float64(v.MaxPixels))))
	t.Max, _ = v.TokensPerImage(side, side)
	return t
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
		Vision: e.Model != nil && e.Model.HasVision(), ImageTokens: e.imageTokens(),
		WeightsDeferred: e.Model != nil && e.Model.Deferred, ExpertCache: e.Totals().ExpertCache,
		GPUMemory: e.gpuMemory(),
	}
}

// gpuMemory is GPUMemory's report, nil on the CPU.
func (e *Engine) gpuMemory() *GPUMemoryUse {
	if e.GPUMemory == nil {
		return nil
	}
	return e.GPUMemory()
}

// NewCPUEncoder returns the model's CPU vision tower (generate.CPUEncoder)
// on a runner of its own, freed by the returned function; the first call
// reads the tower (model.Model.VisionTower).
func NewCPUEncoder(m *model.Model) (generate.Encoder, func(), error) {
	if _, err := m.VisionTower(); err != nil {
		return nil, nil, err
	}
	r := model.NewRunner(m, model.Options{MaxChunk: 1})
	return generate.CPUEncoder(r), r.Close, nil
}

// BackendSession returns a session over b, a backend that lives as long
// as the engine (a GPU runner with its weights uploaded once): it resets
// b's sequence and starts a session on it. The release function leaves b
// open.
func BackendSession(b generate.Backend, maxContext int) (*generate.Session, func(), error) {
	if err := b.Reset(); err != nil {
		return nil, nil, err
	}
	return generate.NewSessionOn(b, maxContext), func() {}, nil
}

// hashBytes is a short content hash (prefix-cache keys of images).
func hashBytes(parts ...[]byte) uint64 {
	h := digest.New()
	for _, p := range parts {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	return binary.LittleEndian.Uint64(h.Sum(nil))
}
