package generate

import (
	"errors"
	"fmt"
	"iter"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
)

// Options configure one generation.
type Options struct {
	Sampler   SamplerOptions
	MaxTokens int   // new tokens at most (0: until a stop token or the context is full)
	Stop      []int // stop tokens (not emitted)
	// Vocab, when > 0, restricts sampling to ids below it: checkpoints pad
	// vocab_size beyond the tokenizer's ids, and padded rows must never be
	// sampled.
	Vocab int
	// Process, when set, sees (and may change) the logits before each
	// token is sampled — a grammar's token mask, logprobs — and keeps
	// sampling on the host (a DeviceSampler is not used).
	Process func(logits []float32)
}

// Backend runs one sequence of a model: the CPU runner with its state
// (NewSession), or a GPU runner that keeps the state on the device.
type Backend interface {
	// Config is the model's configuration.
	Config() *config.Config
	// MaxChunk is the most tokens one Forward call takes.
	MaxChunk() int
	// State is the sequence state, a backend type (model.State on the
	// CPU; GPU buffers on the GPU): its position, size, Reset.
	State() nn.State
	// Forward appends tokens to the sequence; logits receives the last
	// token's logits ([V]) or every token's when len(logits) ≥ T·V.
	Forward(tokens []int, logits []float32) error
	// ForwardEmbeddings is Forward for inputs given as embeddings [T, d].
	ForwardEmbeddings(emb []float32, T int, logits []float32) error
	// Reset empties the sequence.
	Reset() error
}

// Restorer is a backend whose state can be replaced by another of its
// states (the CPU: prefix reuse restores a model.State cloned earlier).
type Restorer interface {
	Restore(st nn.State) error
}

// cpuBackend is the CPU runner with its sequence state.
type cpuBackend struct {
	r  *model.Runner
	st *model.State
}

func (b *cpuBackend) Config() *config.Config { return b.r.M.Cfg }
func (b *cpuBackend) MaxChunk() int          { return b.r.Opt.MaxChunk }
func (b *cpuBackend) State() nn.State        { return b.st }
func (b *cpuBackend) Restore(st nn.State) error {
	ms, ok := st.(*model.State)
	if !ok {
		return fmt.Errorf("restore: a %T is not a CPU state", st)
	}
	b.st = ms
	return nil
}
func (b *cpuBackend) Forward(tokens []int, logits []float32) error {
	return b.r.Forward(b.st, tokens, logits)
}
func (b *cpuBackend) ForwardEmbeddings(emb []float32, T int, logits []float32) error {
	return b.r.ForwardEmbeddings(b.st, emb, T, logits)
}
func (b *cpuBackend) Reset() error { b.st.Reset(); return nil }

// Session is one sequence being generated: a backend (which holds the
// sequence state) and the history, all allocated up front. Decoding a
// token allocates nothing.
type Session struct {
	B       Backend
	logits  []float32
	history []int
	one     [1]int
}

// NewSession prepares a sequence on the CPU runner r with room for
// maxContext tokens (0: the model's context) reserved in the latent caches.
func NewSession(r *model.Runner, maxContext int) *Session {
	c := r.M.Cfg
	if maxContext <= 0 || maxContext > c.MaxPositions {
		maxContext = c.MaxPositions
	}
	st := r.M.NewState()
	if maxContext <= 1<<16 {
		st.Reserve(maxContext)
	}
	return NewSessionOn(&cpuBackend{r: r, st: st}, maxContext)
}

// NewSessionOn prepares a sequence on any backend.
func NewSessionOn(b Backend, maxContext int) *Session {
	c := b.Config()
	if maxContext <= 0 || maxContext > c.MaxPositions {
		maxContext = c.MaxPositions
	}
	return &Session{B: b, logits: make([]float32, c.VocabSize), history: make([]int, 0, min(maxContext, 1<<16))}
}

// State is the backend's sequence state.
func (s *Session) State() nn.State { return s.B.State() }

// Restore continues the sequence from st, a state of this session's
// backend taken earlier (prefix reuse on the CPU: prefill a shared prompt
// once, clone its model.State, Restore a clone for each continuation).
// history is the tokens st has seen. The backend must be a Restorer.
func (s *Session) Restore(st nn.State, history []int) error {
	rb, ok := s.B.(Restorer)
	if !ok {
		return fmt.Errorf("restore: the %T backend cannot restore a state", s.B)
	}
	if err := rb.Restore(st); err != nil {
		return err
	}
	s.history = append(s.history[:0], history...)
	return nil
}

// ErrContext reports a prompt that does not fit in the model's context.
var ErrContext = errors.New("prompt longer than the model's context")

func (s *Session) checkContext(n int) error {
	c := s.B.Config()
	if s.B.State().Pos()+n > c.MaxPositions {
		return fmt.Errorf("%w: %d tokens + %d already cached > %d", ErrContext, n, s.B.State().Pos(), c.MaxPositions)
	}
	return nil
}

// Prefill feeds tokens in pieces of the backend's chunk size; afterwards
// Logits holds the last token's logits.
func (s *Session) Prefill(tokens []int) error {
	_, err := s.prefillTokens(tokens, nil)
	return err
}

// prefillTokens feeds tokens in pieces; with last set, the last piece goes
// through it instead (a device sampler: it returns the next token and the
// logits stay on the device).
func (s *Session) prefillTokens(tokens []int, last func(piece []int) (int, error)) (int, error) {
	if err := s.checkContext(len(tokens)); err != nil {
		return -1, err
	}
	next := -1
	step := s.B.MaxChunk()
	for i := 0; i < len(tokens); i += step {
		j := min(len(tokens), i+step)
		var err error
		if j == len(tokens) && last != nil {
			next, err = last(tokens[i:j])
		} else {
			err = s.B.Forward(tokens[i:j], s.logits)
		}
		if err != nil {
			return -1, err
		}
	}
	s.history = append(s.history, tokens...)
	return next, nil
}

// PrefillEmbeddings is Prefill for tokens whose input embeddings are given
// (emb is [len(ids), d]): the vision path splices image features into the
// sequence this way. ids (with their placeholders) go into the history.
func (s *Session) PrefillEmbeddings(ids []int, emb []float32) error {
	_, err := s.prefillEmbeddings(ids, emb, nil)
	return err
}

// prefillEmbeddings is prefillTokens for PrefillEmbeddings.
func (s *Session) prefillEmbeddings(ids []int, emb []float32, last func(emb []float32, T int) (int, error)) (int, error) {
	d := s.B.Config().HiddenSize
	if len(emb) != len(ids)*d {
		return -1, fmt.Errorf("prefill: %d embedding values for %d tokens of width %d", len(emb), len(ids), d)
	}
	if err := s.checkContext(len(ids)); err != nil {
		return -1, err
	}
	next := -1
	step := s.B.MaxChunk()
	for i := 0; i < len(ids); i += step {
		j := min(len(ids), i+step)
		var err error
		if j == len(ids) && last != nil {
			next, err = last(emb[i*d:j*d], j-i)
		} else {
			err = s.B.ForwardEmbeddings(emb[i*d:j*d], j-i, s.logits)
		}
		if err != nil {
			return -1, err
		}
	}
	s.history = append(s.history, ids...)
	return next, nil
}

// Logits returns the logits after the last Prefill or Step.
func (s *Session) Logits() []float32 { return s.logits }

// Step feeds one token (decode).
func (s *Session) Step(tok int) error {
	s.one[0] = tok
	if err := s.B.Forward(s.one[:], s.logits); err != nil {
		return err
	}
	s.history = append(s.history, tok)
	return nil
}

// Generate prefills prompt and then yields sampled tokens until a stop
// token, MaxTokens, the end of the context, or the consumer stops. The
// error, if any, is yielded last with token −1. On a DeviceSampler backend
// every token, the first after the prompt included, is picked on the
// device (only its id is read back).
func (s *Session) Generate(prompt []int, opt Options) iter.Seq2[int, error] {
	return s.generate(len(prompt), func(d *deviceSampling) (int, error) {
		if d == nil {
			return s.prefillTokens(prompt, nil)
		}
		return s.prefillTokens(prompt, func(piece []int) (int, error) {
			return d.dev.SampleNext(piece, d.opt, d.vocab, d.draw())
		})
	}, opt)
}

// GenerateEmbedded is Generate for a prompt given with its input
// embeddings (see PrefillEmbeddings). The first token is picked on the
// device when the backend is also a DeviceEmbeddingSampler.
func (s *Session) GenerateEmbedded(ids []int, emb []float32, opt Options) iter.Seq2[int, error] {
	return s.generate(len(ids), func(d *deviceSampling) (int, error) {
		de, ok := s.B.(DeviceEmbeddingSampler)
		if d == nil || !ok {
			return s.prefillEmbeddings(ids, emb, nil)
		}
		return s.prefillEmbeddings(ids, emb, func(e []float32, T int) (int, error) {
			return de.SampleNextEmbeddings(e, T, d.opt, d.vocab, d.draw())
		})
	}, opt)
}

// deviceSampling is what a prefill needs to pick the first token on the
// device: the sampler's next draw (none when greedy) goes with it.
type deviceSampling struct {
	dev   DeviceSampler
	opt   SamplerOptions
	vocab int
	smp   *Sampler
}

func (d *deviceSampling) draw() float64 {
	if d.opt.Temperature > 0 {
		return d.smp.Draw()
	}
	return 0
}

// generate runs prefill (given the device sampling, or nil to leave the
// logits in s.logits; it returns the first token when it sampled on the
// device, else −1) and the decode loop.
func (s *Session) generate(n int, prefill func(*deviceSampling) (int, error), opt Options) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if n == 0 {
			yield(-1, errors.New("empty prompt"))
			return
		}
		smp := NewSampler(opt.Sampler, len(s.logits))
		ctx := s.B.Config().MaxPositions
		logits := s.logits
		if opt.Vocab > 0 && opt.Vocab < len(logits) {
			logits = logits[:opt.Vocab]
		}
		if err := opt.Sampler.ValidateVocab(len(logits)); err != nil {
			yield(-1, err)
			return
		}
		// A backend that samples on the device reads back one token id per
		// step instead of the logits (not with a repetition penalty, which
		// needs the history on the host).
		dev, onDevice := s.B.(DeviceSampler)
		onDevice = onDevice && !opt.Sampler.Penalizes() && opt.Process == nil && dev.SamplesOnDevice(opt.Sampler, len(logits))
		var ds *deviceSampling
		if onDevice {
			ds = &deviceSampling{dev: dev, opt: opt.Sampler, vocab: len(logits), smp: smp}
		}
		tok, err := prefill(ds)
		if err != nil {
			yield(-1, err)
			return
		}
		if tok < 0 {
			tok = s.sample(smp, logits, opt.Process)
		}
		// Every emitted token is fed back (so the state and History cover
		// prompt + output, and a conversation can continue); stop tokens
		// are neither emitted nor fed.
		for n := 0; opt.MaxTokens <= 0 || n < opt.MaxTokens; n++ {
			for _, st := range opt.Stop {
				if tok == st {
					return
				}
			}
			if !yield(tok, nil) {
				return
			}
			if s.B.State().Pos() >= ctx {
				return
			}
			if onDevice {
				s.one[0] = tok
				next, err := dev.SampleNext(s.one[:], opt.Sampler, len(logits), ds.draw())
				if err != nil {
					yield(-1, err)
					return
				}
				s.history = append(s.history, tok)
				tok = next
				continue
			}
			if err := s.Step(tok); err != nil {
				yield(-1, err)
				return
			}
			tok = s.sample(smp, logits, opt.Process)
		}
	}
}

// sample picks the next token on the host, after process (if any).
func (s *Session) sample(smp *Sampler, logits []float32, process func([]float32)) int {
	if process != nil {
		process(logits)
	}
	return smp.Sample(logits, s.history)
}

// DeviceSampler is implemented by backends that sample the next token on
// the device (wgsl.Runner), so a decode step reads back one token id:
// SampleNext feeds tokens and returns the token a Sampler with opt would
// pick (SampleDraw: the logit bias, no repetition penalty) from the last
// position's logits restricted to the first vocab ids, given the draw u
// (Sampler.Draw; unused when greedy). SamplesOnDevice reports whether it
// can for these options and vocab logits.
type DeviceSampler interface {
	SamplesOnDevice(opt SamplerOptions, vocab int) bool
	SampleNext(tokens []int, opt SamplerOptions, vocab int, u float64) (int, error)
}

// DeviceEmbeddingSampler is a DeviceSampler that also takes a piece given
// as input embeddings ([T, d], as Backend.ForwardEmbeddings), so the first
// token after a multimodal prompt is picked on the device too.
type DeviceEmbeddingSampler interface {
	DeviceSampler
	SampleNextEmbeddings(emb []float32, T int, opt SamplerOptions, vocab int, u float64) (int, error)
}

// History returns every token fed to the sequence so far (prompt pieces
// and generated tokens that were stepped).
func (s *Session) History() []int { return s.history }

// Reset empties the sequence (state and history), keeping its memory.
func (s *Session) Reset() error {
	s.history = s.history[:0]
	return s.B.Reset()
}

// Runner is the CPU runner of a session made by NewSession (nil on other
// backends).
func (s *Session) Runner() *model.Runner {
	if b, ok := s.B.(*cpuBackend); ok {
		return b.r
	}
	return nil
}
