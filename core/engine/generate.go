package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync/atomic"
	"time"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// Options describe one generation.
type Options struct {
	// The prompt: Chat (a conversation in core/chat's, OpenAI's, shape:
	// text and image parts, tools, template variables; rendered with the
	// chat template, generation prompt added), else Tokens, else Prompt
	// text. Chat's image parts (chat.WithImages) take Images in order; with
	// Tokens or Prompt the images go before the prompt (as `tessera run
	// --image`).
	Chat   *chat.Input
	Prompt string
	Tokens []int
	Images []Image
	// ImagesInPrompt: Tokens or Prompt already hold one media placeholder
	// per image where each goes (a chat template placed them); a count
	// that differs is an error.
	ImagesInPrompt bool
	MaxTokens      int // new tokens at most (> 0)
	Sampler        generate.SamplerOptions
	// Stop ends the output before the first occurrence of any of these
	// strings (the text returned stops before it).
	Stop []string
	// TopLogprobs > 0 (or Logprobs) reports each token's log-probability
	// and the TopLogprobs most likely alternatives (sampling then stays on
	// the host).
	Logprobs    bool
	TopLogprobs int
	// Grammar constrains the output (JSON, or JSON matching a schema):
	// every output is complete and valid when the generation ends with a
	// stop or within MaxTokens (the grammar closes what is open in time).
	Grammar *grammar.Grammar
	// MaxPromptTokens > 0 refuses (ErrContext) a prompt longer than this
	// (images expanded).
	MaxPromptTokens int
	// MaxContext > 0 bounds prompt + output: MaxTokens is cut to the room
	// the prompt leaves, and a prompt that leaves none is ErrContext.
	MaxContext int
	// NoCache skips the prefix cache for this generation.
	NoCache bool
	// RouteHook, when set, receives the experts each MoE layer chose
	// (model.Runner.RouteHook on the CPU; on the GPU a LiveBackend reads
	// them back after each step).
	RouteHook func(layer int, experts []int, T, K int)
	// Live, when set, receives the routing of every step and, after the
	// prompt and after each decoded token (before it is emitted), the
	// sequence state (KDA norms, cache size): the live routing/state view
	// of the desktop and the page. Without it nothing extra is read back.
	Live *LiveView
	// OnStart, when set, is called once the request is accepted (prompt
	// rendered, images prepared, context checked) with the prompt's
	// token count, before the prefill.
	OnStart func(promptTokens int)

	// inspect (tests) sees the logits of each sample before any change.
	inspect func(logits []float32)
}

// Piece is one generated token with the text it completes (empty while a
// UTF-8 character is split across tokens, or while the text could still
// turn into a stop string).
type Piece struct {
	ID   int
	Text string
	// Logprob, Top and TokenText (the token's own text) are set when
	// Options asked for log-probabilities.
	Logprob   float32
	Top       []TokenLogprob
	TokenText string
}

// TokenLogprob is one candidate token with its log-probability.
type TokenLogprob struct {
	ID      int
	Text    string
	Logprob float32
}

// Stats describe a finished generation.
type Stats struct {
	PromptTokens int     `json:"promptTokens"`
	CachedTokens int     `json:"cachedTokens"` // prompt tokens resumed from the prefix cache
	Tokens       int     `json:"tokens"`
	TTFTMs       float64 `json:"ttftMs"`        // prompt given → first token sampled
	DecodeTokS   float64 `json:"decodeTokPerS"` // tokens after the first per second
	TotalMs      float64 `json:"totalMs"`
	Stopped      string  `json:"stopped"`    // "length", "stop", "cancelled" or "context"
	Tail         string  `json:"tail"`       // text held back at the end (flushed)
	StateBytes   int64   `json:"stateBytes"` // KDA state + MLA cache of the sequence at the end
	Backend      string  `json:"backend"`
	// Images: one entry per input image; EncodeMs: preprocessing and the
	// vision tower (part of TTFT).
	Images   []ImageStats `json:"images,omitempty"`
	EncodeMs float64      `json:"encodeMs,omitempty"`
	// ExpertCache: the GPU's routed-expert cache over this generation,
	// when the GPU streams experts (a budget below the model's size);
	// DecodeExpertCache over its decode steps alone (after the first
	// token, as tessera bench measures it): the prompt's pieces run
	// expert-major and hit differently.
	ExpertCache       *ExpertCacheStats `json:"expertCache,omitempty"`
	DecodeExpertCache *ExpertCacheStats `json:"decodeExpertCache,omitempty"`
	// DispatchesPerToken and SubmitsPerToken: the compute dispatches and
	// queue submissions of the last decode step, when the generation
	// decoded on a GPU runner.
	DispatchesPerToken int `json:"dispatchesPerToken,omitempty"`
	SubmitsPerToken    int `json:"submitsPerToken,omitempty"`
}

// ExpertCacheStats describe the GPU's routed-expert cache (expert
// streaming) over a generation, or since the engine was opened (Totals).
type ExpertCacheStats struct {
	Slots               int     `json:"slots"`   // experts per MoE layer kept on the GPU
	Experts             int     `json:"experts"` // routed experts per MoE layer
	Hits                int64   `json:"hits"`    // routed experts found on the GPU
	Misses              int64   `json:"misses"`  // routed experts uploaded
	HitRate             float64 `json:"hitRate"` // hits / (hits + misses)
	UploadBytes         int64   `json:"uploadBytes"`
	UploadBytesPerToken float64 `json:"uploadBytesPerToken"`
	UploadMs            float64 `json:"uploadMs"` // time reading, packing and writing the misses
	Tokens              int64   `json:"tokens"`   // tokens the runner ran meanwhile
	// CPULayers MoE layers compute their experts on the CPU (--n-cpu-moe),
	// taking CPUMs to compute and write back.
	CPULayers int     `json:"cpuLayers,omitempty"`
	CPUMs     float64 `json:"cpuMs,omitempty"`
}

// expertCacheStats converts the runner's counters (nil when it neither
// streams nor runs experts on the CPU).
func expertCacheStats(s wgsl.ExpertStats) *ExpertCacheStats {
	if !s.Streaming && s.CPULayers == 0 {
		return nil
	}
	c := &ExpertCacheStats{Slots: s.Slots, Experts: s.Experts, Hits: s.Hits, Misses: s.Misses, HitRate: s.HitRate(),
		UploadBytes: s.UploadBytes, UploadMs: ms(s.UploadTime), Tokens: s.Tokens, CPULayers: s.CPULayers, CPUMs: ms(s.CPUTime)}
	if s.Tokens > 0 {
		c.UploadBytesPerToken = float64(s.UploadBytes) / float64(s.Tokens)
	}
	return c
}

// FinishReason is OpenAI's finish_reason for the generation: "length"
// when it ran out of tokens (max_tokens or the context), else "stop" (a
// stop token or string, or a cancelled generation: a client that stopped
// reading asked for no more). It is the one mapping every API uses.
func (s Stats) FinishReason() string {
	if s.Stopped == "length" || s.Stopped == "context" {
		return "length"
	}
	return "stop"
}

// counters are the engine's totals since it was opened.
type counters struct {
	requests, tokens, promptTokens, cachedTokens atomic.Int64
}

// Totals are the engine's counters since it was opened.
type Totals struct {
	Requests     int64      `json:"requests"`
	Tokens       int64      `json:"tokens"`
	PromptTokens int64      `json:"promptTokens"`
	CachedTokens int64      `json:"cachedTokens"`
	Cache        CacheStats `json:"cache"`
	// ExpertCache: the GPU's routed-expert cache since the engine was
	// opened, when it streams experts.
	ExpertCache *ExpertCacheStats `json:"expertCache,omitempty"`
}

// Totals reports the engine's counters.
func (e *Engine) Totals() Totals {
	t := Totals{Requests: e.counters.requests.Load(), Tokens: e.counters.tokens.Load(),
		PromptTokens: e.counters.promptTokens.Load(), CachedTokens: e.counters.cachedTokens.Load()}
	if e.Cache != nil {
		t.Cache = e.Cache.Stats()
	}
	if e.ExpertStats != nil {
		t.ExpertCache = expertCacheStats(e.ExpertStats())
	}
	return t
}

// ErrContext reports a prompt (with its images and MaxTokens room) that
// does not fit in the model's context.
var ErrContext = generate.ErrContext

// ErrBadRequest matches (errors.Is) the errors of a generation that are
// the request's fault: bad options, prompt ids or images, a response
// format that cannot fit max_tokens.
var ErrBadRequest = errors.New("bad request")

type badRequest struct{ error }

func (b badRequest) Is(t error) bool { return t == ErrBadRequest }
func (b badRequest) Unwrap() error   { return b.error }

func bad(err error) error {
	if err == nil {
		return nil
	}
	return badRequest{err}
}

// Prompt is a request's prompt as token ids (images not yet expanded) and
// where a shared prefix worth caching ends (0: none).
func (e *Engine) prompt(opt *Options) (ids []int, boundary int, stops []int, err error) {
	stops = e.Cfg.EOSTokenIDs
	switch {
	case opt.Chat != nil:
		in := *opt.Chat
		in.AddGenerationPrompt = true
		if n := len(chat.Images(in.Messages)); n != len(opt.Images) {
			return nil, 0, nil, fmt.Errorf("the messages attach %d images but %d were given", n, len(opt.Images))
		}
		if ids, err = e.encodeChat(in); err != nil {
			return nil, 0, nil, err
		}
		if ph := e.Cfg.MediaPlaceholderTokenID; len(opt.Images) > 0 {
			if n := countID(ids, ph); n != len(opt.Images) {
				return nil, 0, nil, fmt.Errorf("the chat template (%s) placed %d image placeholders (token %d) for %d images", e.chat.Source, n, ph, len(opt.Images))
			}
		}
		// the leading system turn(s) are shared by many requests: cache there
		k := 0
		for k < len(in.Messages) && in.Messages[k].Role == "system" && len(chat.Images(in.Messages[k:k+1])) == 0 {
			k++
		}
		if k < len(in.Messages) {
			head := in
			head.Messages, head.AddGenerationPrompt = in.Messages[:k], false
			if p, err := e.encodeChat(head); err == nil && len(p) < len(ids) && slices.Equal(p, ids[:len(p)]) {
				boundary = len(p)
			}
		}
		return ids, boundary, e.chatStops(), nil
	case len(opt.Tokens) > 0:
		ids = opt.Tokens
	case opt.Prompt != "":
		if ids, err = e.codec.Encode(opt.Prompt); err != nil {
			return nil, 0, nil, err
		}
	default:
		return nil, 0, nil, errors.New("empty prompt: give messages, prompt text or token ids")
	}
	if len(opt.Images) > 0 && !opt.ImagesInPrompt {
		if ids, err = generate.ImagePrompt(e.codec, e.Cfg.MediaPlaceholderTokenID, len(opt.Images), ids); err != nil {
			return nil, 0, nil, err
		}
	}
	return ids, 0, stops, nil
}

func countID(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// Generate prepares the prompt and generates, calling emit for every
// token. It stops at a stop token (config eos_token_id; the chat format's
// end of turn for Chat), a stop string, MaxTokens, the end of the
// context, when ctx is cancelled, or when emit returns false. Sampling is
// restricted to ids the tokenizer knows, as in `tessera run`.
func (e *Engine) Generate(ctx context.Context, opt Options, emit func(Piece) bool) (st Stats, err error) {
	st = Stats{Backend: e.Backend}
	if e.Model == nil {
		return st, errors.New("the engine was disposed; load the model again")
	}
	if opt.MaxTokens <= 0 {
		return st, bad(fmt.Errorf("maxTokens must be > 0, got %d", opt.MaxTokens))
	}
	if err := opt.Sampler.ValidateVocab(e.codec.Vocab()); err != nil {
		return st, bad(err)
	}
	if opt.TopLogprobs < 0 || opt.TopLogprobs > 20 {
		return st, bad(fmt.Errorf("top_logprobs must be in [0, 20], got %d", opt.TopLogprobs))
	}
	if len(opt.Images) > 0 && !e.Model.HasVision() {
		return st, bad(errors.New("this model has no vision tower (no vision_config in config.json): it cannot take images"))
	}
	ids, boundary, stops, err := e.prompt(&opt)
	if err != nil {
		return st, bad(err)
	}
	for i, id := range ids {
		if id < 0 || id >= e.Cfg.VocabSize {
			return st, bad(fmt.Errorf("prompt token %d (index %d) is outside the vocabulary [0, %d)", id, i, e.Cfg.VocabSize))
		}
	}
	var con *grammar.Constraint
	if opt.Grammar != nil {
		if con, err = grammar.NewConstraint(opt.Grammar, e.tokenTable(), stops); err != nil {
			return st, bad(err)
		}
		if need := con.MinTokens(); need > opt.MaxTokens {
			return st, bad(fmt.Errorf("max_tokens %d is too small for the response format: its shortest output takes %d tokens", opt.MaxTokens, need))
		}
	}
	release, err := e.acquire(ctx)
	if err != nil {
		return st, err
	}
	defer release()
	var x0, x1 wgsl.ExpertStats // at the start, at the first token
	if e.ExpertStats != nil {
		x0 = e.ExpertStats()
		defer func() {
			if e.ExpertStats != nil {
				x := e.ExpertStats()
				st.ExpertCache = expertCacheStats(x.Sub(x0))
				if st.Tokens > 1 {
					st.DecodeExpertCache = expertCacheStats(x.Sub(x1))
				}
			}
		}()
	}
	t0 := time.Now()
	p, err := e.prepareImages(ids, opt.Images)
	if err != nil {
		return st, bad(err)
	}
	st.Images = p.stats
	ids = p.ids
	if opt.MaxPromptTokens > 0 && len(ids) > opt.MaxPromptTokens {
		return st, fmt.Errorf("%w: the prompt has %d tokens, at most %d fit with max_tokens %d", ErrContext, len(ids), opt.MaxPromptTokens, opt.MaxTokens)
	}
	if opt.MaxContext > 0 {
		if len(ids) >= opt.MaxContext {
			return st, fmt.Errorf("%w: the prompt has %d tokens, the context %d", ErrContext, len(ids), opt.MaxContext)
		}
		opt.MaxTokens = min(opt.MaxTokens, opt.MaxContext-len(ids))
		if con != nil && con.MinTokens() > opt.MaxTokens {
			return st, bad(fmt.Errorf("the context leaves %d tokens after the prompt, too few for the response format (its shortest output takes %d)", opt.MaxTokens, con.MinTokens()))
		}
	}
	if len(ids) >= e.Cfg.MaxPositions {
		return st, fmt.Errorf("%w: the prompt has %d tokens and the context %d", ErrContext, len(ids), e.Cfg.MaxPositions)
	}
	st.PromptTokens = len(ids)
	if opt.OnStart != nil {
		opt.OnStart(len(ids))
	}
	sess, free, err := e.NewSequence(e.Model, min(len(ids)+opt.MaxTokens, e.Cfg.MaxPositions))
	if err != nil {
		return st, err
	}
	defer func() { free() }() // free changes when a failed GPU step moves to the CPU
	var live *liveRecorder
	if opt.Live != nil {
		live = &liveRecorder{v: opt.Live, backend: "WebGPU", last: time.Now()}
		if sess.Runner() != nil {
			live.backend = "CPU"
		}
	}
	hook := opt.RouteHook
	if live != nil {
		hook = func(layer int, experts []int, T, K int) {
			live.v.Routed(layer, experts, T, K)
			if opt.RouteHook != nil {
				opt.RouteHook(layer, experts, T, K)
			}
		}
	}
	unhook := func() {}
	defer func() { unhook() }() // unhook changes with sess
	if hook != nil {
		if unhook, err = hookRoutes(sess, hook); err != nil {
			return st, err
		}
	}
	// Resume from the longest cached prefix (at least one token is left to
	// prefill: it yields the logits of the first sample).
	cache := e.Cache
	if _, ok := sess.B.(generate.Snapshotter); !ok || opt.NoCache {
		cache = nil
	}
	pos := 0
	if cache != nil {
		if snap, hist := cache.Lookup(p.key, len(ids)-1); snap != nil {
			if err := sess.RestoreSnapshot(snap, hist); err == nil {
				pos = len(hist)
			}
		}
	}
	if pos == 0 {
		if err := sess.Reset(); err != nil {
			return st, err
		}
	}
	st.CachedTokens = pos
	if err := ctx.Err(); err != nil {
		return st, err
	}
	te := time.Now()
	emb, err := e.embeddings(p, pos)
	if err != nil {
		return st, err
	}
	if len(p.pxs) > 0 {
		st.EncodeMs = ms(time.Since(te))
	}
	d := e.Cfg.HiddenSize
	embAt := func(i int) []float32 { // embeddings of ids[i:] (emb covers ids[pos0:])
		if emb == nil {
			return nil
		}
		return emb[(i-st.CachedTokens)*d:]
	}
	var prefillErr error // a failed GPU prefill goes on on the CPU under CPUFallback (onCPU)
	if cache != nil && boundary > pos && boundary < len(ids) {
		if x := embAt(pos); x != nil {
			prefillErr = sess.PrefillEmbeddings(ids[pos:boundary], x[:(boundary-pos)*d])
		} else {
			prefillErr = sess.Prefill(ids[pos:boundary])
		}
		if prefillErr == nil {
			if snap, err := sess.Snapshot(); err == nil {
				cache.Put(p.key[:boundary], ids[:boundary], snap)
			}
			pos = boundary
		}
	}
	// Prefill all but the last piece here, in the pieces the session would
	// cut, so that a cancelled request (a client that went away) stops
	// between pieces of a long prompt.
	for step := sess.B.MaxChunk(); prefillErr == nil && len(ids)-pos > step; pos += step {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		if x := embAt(pos); x != nil {
			prefillErr = sess.PrefillEmbeddings(ids[pos:pos+step], x[:step*d])
		} else {
			prefillErr = sess.Prefill(ids[pos : pos+step])
		}
	}
	gopt := generate.Options{Sampler: opt.Sampler, MaxTokens: opt.MaxTokens, Stop: stops, Vocab: e.codec.Vocab()}
	// logits processing on the host: the grammar's mask, log-probabilities
	var lp *logprobs
	if opt.Logprobs || opt.TopLogprobs > 0 {
		lp = &logprobs{k: opt.TopLogprobs}
	}
	made := 0
	if con != nil || lp != nil || opt.inspect != nil {
		gopt.Process = func(logits []float32) {
			if opt.inspect != nil {
				opt.inspect(logits)
			}
			if con != nil {
				con.Mask(logits, opt.MaxTokens-made)
			}
			if lp != nil {
				lp.observe(logits)
			}
		}
	}
	// A GPU step that fails under backend auto (CPUFallback) moves the
	// engine to the CPU, where the generation goes on from the prompt and
	// the tokens emitted so far (text prompts: image features would have
	// to be encoded again).
	var emitted []int
	onCPU := func(cause error) (func(func(int, error) bool), error) {
		if !e.CPUFallback || ctx.Err() != nil || len(p.pxs) > 0 || errors.Is(cause, ErrContext) {
			return nil, cause
		}
		e.CPUFallback = false
		if err := e.UseCPU("the GPU failed mid-generation: " + cause.Error()); err != nil {
			return nil, fmt.Errorf("%w (and moving to the CPU failed: %v)", cause, err)
		}
		free()
		free = func() {}
		s2, f2, err := e.NewSequence(e.Model, min(len(ids)+opt.MaxTokens, e.Cfg.MaxPositions))
		if err != nil {
			return nil, fmt.Errorf("%w (and the CPU sequence failed: %v)", cause, err)
		}
		sess, free = s2, f2
		if err := sess.Reset(); err != nil {
			return nil, err
		}
		if hook != nil {
			unhook()
			if unhook, err = hookRoutes(sess, hook); err != nil {
				return nil, err
			}
		}
		if live != nil {
			live.backend = "CPU"
		}
		st.Backend = e.Backend
		g := gopt
		g.MaxTokens = opt.MaxTokens - made
		return sess.Generate(append(slices.Clone(ids), emitted...), g), nil
	}
	var seq func(func(int, error) bool)
	switch x := embAt(pos); {
	case prefillErr != nil:
		if seq, err = onCPU(prefillErr); err != nil {
			return st, err
		}
	case x != nil:
		seq = sess.GenerateEmbedded(ids[pos:], x, gopt)
	default:
		seq = sess.Generate(ids[pos:], gopt)
	}
	stream := e.codec.Stream()
	stopper, hitStop := newStopper(opt.Stop), false
	var tFirst time.Time
	st.Stopped = "stop"
gen:
	for {
		for tok, err := range seq {
			if err != nil {
				if seq, err = onCPU(err); err != nil {
					return st, err
				}
				continue gen
			}
			emitted = append(emitted, tok)
			if st.Tokens == 0 {
				tFirst = time.Now()
				st.TTFTMs = ms(tFirst.Sub(t0))
				if e.ExpertStats != nil {
					x1 = e.ExpertStats()
				}
			}
			st.Tokens++
			made++
			if con != nil {
				if err := con.Accept(tok); err != nil {
					return st, err
				}
			}
			piece, err := stream.Add(tok)
			if err != nil {
				return st, err
			}
			text, hit := stopper.Push(piece)
			hitStop = hit
			pc := Piece{ID: tok, Text: text}
			if lp != nil {
				pc.Logprob, pc.Top = lp.of(tok, e)
				pc.TokenText = e.TokenText(tok)
			}
			if live != nil {
				live.step(sess, e.Cfg.NumHiddenLayers)
				if e.ExpertStats != nil { // the cache over this generation so far
					if x := expertCacheStats(e.ExpertStats().Sub(x0)); x != nil && x.CPULayers == 0 {
						live.v.SetExpertCache(&ExpertCacheView{HitRate: x.HitRate, BytesPerToken: x.UploadBytesPerToken})
					}
				}
			}
			if hit {
				emit(pc)
				st.Stopped = "stop"
				break gen
			}
			if !emit(pc) || ctx.Err() != nil {
				st.Stopped = "cancelled"
				break gen
			}
		}
		break
	}
	end := time.Now()
	if st.Stopped == "stop" && !hitStop {
		switch {
		case st.Tokens >= opt.MaxTokens:
			st.Stopped = "length"
		case st.PromptTokens+st.Tokens >= e.Cfg.MaxPositions:
			st.Stopped = "context"
		}
	}
	if con != nil && st.Stopped == "length" && con.Complete() {
		st.Stopped = "stop" // the document ended with the budget: complete, not cut
	}
	if !hitStop {
		tail, hit := stopper.Push(stream.Flush())
		st.Tail = tail
		if !hit {
			st.Tail += stopper.Flush()
		}
	}
	st.TotalMs = ms(end.Sub(t0))
	if st.Tokens > 1 {
		st.DecodeTokS = float64(st.Tokens-1) / end.Sub(tFirst).Seconds()
		if e.GPUStep != nil {
			if g := e.GPUStep(); g.Tokens == 1 {
				st.DispatchesPerToken, st.SubmitsPerToken = g.Dispatches, g.Submits
			}
		}
	}
	s := model.ComputeStats(e.Cfg)
	st.StateBytes = s.KDAStateBytes + s.CacheBytesPerTok*int64(sess.State().Pos())
	if cache != nil && st.Stopped != "cancelled" {
		// the conversation so far: the next turn of a chat starts with it
		hist := sess.History()
		if len(hist) >= len(ids) && slices.Equal(hist[:len(ids)], ids) {
			if snap, err := sess.Snapshot(); err == nil {
				cache.Put(append(slices.Clone(p.key), hist[len(ids):]...), hist, snap)
			}
		}
	}
	e.counters.requests.Add(1)
	e.counters.tokens.Add(int64(st.Tokens))
	e.counters.promptTokens.Add(int64(st.PromptTokens))
	e.counters.cachedTokens.Add(int64(st.CachedTokens))
	return st, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// newStopper is a chat.Stopper for the non-empty stop strings.
func newStopper(stops []string) *chat.Stopper {
	var s []string
	for _, x := range stops {
		if x != "" {
			s = append(s, x)
		}
	}
	return chat.NewStopper(s)
}

// logprobs computes log-probabilities from the logits a token is sampled
// from (after a grammar's mask, before temperature).
type logprobs struct {
	k   int
	lse float64
	top []int
	val []float32
}

func (l *logprobs) observe(logits []float32) {
	m := float32(math.Inf(-1))
	for _, v := range logits {
		m = max(m, v)
	}
	var sum float64
	for _, v := range logits {
		sum += math.Exp(float64(v - m))
	}
	l.lse = float64(m) + math.Log(sum)
	l.val = append(l.val[:0], logits...)
	l.top = l.top[:0]
	// the k most likely ids, highest first, a lower id first among equals
	// (one pass with insertion: k ≤ 20, nothing allocated per token)
	for i, v := range logits {
		if l.k == 0 || (len(l.top) == l.k && v <= logits[l.top[l.k-1]]) {
			continue
		}
		j := len(l.top)
		if j < l.k {
			l.top = append(l.top, 0)
		} else {
			j--
		}
		for ; j > 0 && v > logits[l.top[j-1]]; j-- {
			l.top[j] = l.top[j-1]
		}
		l.top[j] = i
	}
}

func (l *logprobs) of(tok int, e *Engine) (float32, []TokenLogprob) {
	lp := func(id int) float32 {
		if id < 0 || id >= len(l.val) {
			return float32(math.Inf(-1))
		}
		return float32(float64(l.val[id]) - l.lse)
	}
	var top []TokenLogprob
	for _, id := range l.top {
		top = append(top, TokenLogprob{ID: id, Text: e.TokenText(id), Logprob: lp(id)})
	}
	return lp(tok), top
}

// TokenText is the text of one token on its own (empty for ids outside
// the tokenizer).
func (e *Engine) TokenText(id int) string {
	t := e.tokenTable()
	if id < 0 || id >= len(t.Text) {
		return ""
	}
	return t.Text[id]
}

// tokenTable is the text of every token (for grammars and logprobs),
// made once.
func (e *Engine) tokenTable() *grammar.Tokens {
	e.tableOnce.Do(func() { e.table = grammar.NewTokens(e.codec) })
	return e.table
}
