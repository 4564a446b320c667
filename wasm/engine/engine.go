// Package engine is the platform-independent half of tessera's browser
// build: it loads a model from an Opener (bytes a browser fetched, or files
// on disk in tests), generates with streaming callbacks, cancellation and
// timing, and describes the model. The GOOS=js entry point in package main
// of ../ (wasm/) wraps it in Promise-returning JavaScript exports; keeping
// the logic here lets native tests check that the browser path yields
// exactly the tokens of `tessera run --backend cpu`.
//
// The model runs on a Runner: the CPU reference compiled to WebAssembly
// (NewCPURunner), or the WebGPU runner of package wgsl through
// BackendRunner. Images (RGBA pixels the browser decoded) are encoded by
// the engine's vision Encoder (the CPU tower by default, the GPU tower when
// the model runs on WebGPU) and fused into the prompt exactly as
// `tessera run --image` does.
package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
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
	// GenerateEmbedded is Generate for a prompt given with its input
	// embeddings [len(ids), hidden] (images fused in), as
	// generate.Session.GenerateEmbedded.
	GenerateEmbedded(ids []int, emb []float32, opt generate.Options) func(yield func(int, error) bool)
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
	// NewEncoder returns the vision encoder of one generation with images
	// and a function that frees what it allocated (may be nil);
	// NewCPUEncoder by default.
	NewEncoder func(m *model.Model) (generate.Encoder, func(), error)
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
func Load(open safetensors.Opener) (*Engine, error) { return load(open, false) }

// LoadDeferred is Load with the weight matrices left in the checkpoint
// (model.LoadDeferred) for a GPU runner to upload one at a time: the wasm
// heap then never holds the whole model. Such an engine runs only once
// its NewRunner is a GPU runner's (the CPU runner refuses the model).
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
	e := &Engine{Cfg: cfg, busy: make(chan struct{}, 1), NewRunner: NewCPURunner, NewEncoder: NewCPUEncoder, Backend: CPUBackend}
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
	load := model.Load
	if deferred {
		load = model.LoadDeferred
	}
	m, err := load(cfg, ck)
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
	e.NewRunner, e.NewEncoder = NewCPURunner, NewCPUEncoder
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

// Codec is the model's text codec (its tokenizer, or byte ids).
func (e *Engine) Codec() tokenizer.Codec { return e.codec }

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
	// Images are placed before the prompt, in order, as `tessera run
	// --image` places them (generate.ImagePrompt, then
	// generate.FusePatches) — unless ImagesInPrompt.
	Images []Image
	// ImagesInPrompt: the prompt already holds one media placeholder per
	// image where each goes (a chat template placed them); a count that
	// differs is an error.
	ImagesInPrompt bool
}

// Image is one decoded image: non-premultiplied RGBA pixels, 4 bytes per
// pixel, row-major (a browser's ImageData). Transparent pixels are
// composited over white (imageio.FromRGBA).
type Image struct {
	Width, Height int
	RGBA          []byte
}

// ImageLimits bound the images Generate accepts (imageio.DefaultLimits:
// 40 megapixels, 16384 pixels per side).
var ImageLimits = imageio.DefaultLimits

// ImageStats describe one input image of a generation.
type ImageStats struct {
	Width  int `json:"width"`
	Height int `json:"height"`
	// GridW×GridH patches after the smart resize; Tokens placeholder
	// tokens in the prompt.
	GridW  int `json:"gridW"`
	GridH  int `json:"gridH"`
	Tokens int `json:"tokens"`
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
	// Images: one entry per input image; EncodeMs: preprocessing and the
	// vision tower (part of TTFT).
	Images   []ImageStats `json:"images,omitempty"`
	EncodeMs float64      `json:"encodeMs,omitempty"`
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
	t0 := time.Now()
	var emb []float32
	if len(opt.Images) > 0 {
		var err error
		if ids, emb, st.Images, err = e.fuseImages(ids, opt.Images, opt.ImagesInPrompt); err != nil {
			return st, err
		}
		st.EncodeMs = ms(time.Since(t0))
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
	var tFirst time.Time
	st.Stopped = "stop"
	gopt := generate.Options{Sampler: opt.Sampler, MaxTokens: opt.MaxTokens, Stop: e.Cfg.EOSTokenIDs, Vocab: e.codec.Vocab()}
	seq := r.Generate(ids, gopt)
	if emb != nil {
		seq = r.GenerateEmbedded(ids, emb, gopt)
	}
	for tok, err := range seq {
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

// fuseImages builds the input of an image+text prompt as `tessera run
// --image` does: one media placeholder per image before the prompt ids
// (generate.ImagePrompt), each image composited over white, resized to the
// patch grid and normalised (imageio.FromRGBA, imageio.Preprocess),
// encoded by the engine's vision encoder and fused (generate.FusePatches).
// It returns the expanded ids and their input embeddings. With placed,
// prompt already holds the placeholders.
func (e *Engine) fuseImages(prompt []int, images []Image, placed bool) ([]int, []float32, []ImageStats, error) {
	m := e.Model
	if m.Vision == nil || m.VisionCfg == nil {
		return nil, nil, nil, errors.New("this model has no vision tower (no vision_config in config.json): it cannot take images")
	}
	pxs := make([]*imageio.Patches, len(images))
	stats := make([]ImageStats, len(images))
	for i, im := range images {
		img, err := imageio.FromRGBA(im.Width, im.Height, im.RGBA, ImageLimits)
		if err != nil {
			return nil, nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		if pxs[i], err = imageio.Preprocess(img, m.VisionCfg.Preprocess()); err != nil {
			return nil, nil, nil, fmt.Errorf("image %d (%dx%d): %w", i+1, im.Width, im.Height, err)
		}
		stats[i] = ImageStats{Width: im.Width, Height: im.Height, GridW: pxs[i].GridW, GridH: pxs[i].GridH, Tokens: pxs[i].Merged()}
	}
	ids := prompt
	if !placed {
		var err error
		if ids, err = generate.ImagePrompt(e.codec, e.Cfg.MediaPlaceholderTokenID, len(images), prompt); err != nil {
			return nil, nil, nil, err
		}
	}
	enc, free, err := e.NewEncoder(m)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("vision encoder: %w", err)
	}
	if free != nil {
		defer free()
	}
	full, emb, err := generate.FusePatches(m, enc, ids, pxs)
	if err != nil {
		return nil, nil, nil, err
	}
	return full, emb, stats, nil
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
		Vision: e.Model != nil && e.Model.Vision != nil, ImageTokens: e.imageTokens(),
		WeightsDeferred: e.Model != nil && e.Model.Deferred,
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

func (r *sessionRunner) GenerateEmbedded(ids []int, emb []float32, opt generate.Options) func(yield func(int, error) bool) {
	return r.s.GenerateEmbedded(ids, emb, opt)
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

// NewCPUEncoder returns the model's CPU vision tower (generate.CPUEncoder)
// on a runner of its own, freed by the returned function.
func NewCPUEncoder(m *model.Model) (generate.Encoder, func(), error) {
	if m.Vision == nil {
		return nil, nil, errors.New("the model has no vision tower")
	}
	r := model.NewRunner(m, model.Options{MaxChunk: 1})
	return generate.CPUEncoder(r), r.Close, nil
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
