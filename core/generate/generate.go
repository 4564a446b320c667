package generate

import (
	"errors"
	"fmt"
	"iter"

	"github.com/tessera-llm/tessera/core/model"
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
}

// Session is one sequence being generated: a runner, its state and a
// sampler, all allocated up front. Decoding a token allocates nothing.
type Session struct {
	R       *model.Runner
	State   *model.State
	logits  []float32
	history []int
}

// NewSession prepares a sequence on runner r with room for maxContext
// tokens (0: the model's context) reserved in the latent caches.
func NewSession(r *model.Runner, maxContext int) *Session {
	c := r.M.Cfg
	if maxContext <= 0 || maxContext > c.MaxPositions {
		maxContext = c.MaxPositions
	}
	st := r.M.NewState()
	if maxContext <= 1<<16 {
		st.Reserve(maxContext)
	}
	return &Session{R: r, State: st, logits: make([]float32, c.VocabSize), history: make([]int, 0, min(maxContext, 1<<16))}
}

// ErrContext reports a prompt that does not fit in the model's context.
var ErrContext = errors.New("prompt longer than the model's context")

// Prefill feeds tokens in pieces of the runner's chunk size; afterwards
// Logits holds the last token's logits.
func (s *Session) Prefill(tokens []int) error {
	c := s.R.M.Cfg
	if s.State.Pos+len(tokens) > c.MaxPositions {
		return fmt.Errorf("%w: %d tokens + %d already cached > %d", ErrContext, len(tokens), s.State.Pos, c.MaxPositions)
	}
	step := s.R.Opt.MaxChunk
	for i := 0; i < len(tokens); i += step {
		j := min(len(tokens), i+step)
		if err := s.R.Forward(s.State, tokens[i:j], s.logits); err != nil {
			return err
		}
	}
	s.history = append(s.history, tokens...)
	return nil
}

// PrefillEmbeddings is Prefill for tokens whose input embeddings are given
// (emb is [len(ids), d]): the vision path splices image features into the
// sequence this way. ids (with their placeholders) go into the history.
func (s *Session) PrefillEmbeddings(ids []int, emb []float32) error {
	c := s.R.M.Cfg
	d := c.HiddenSize
	if len(emb) != len(ids)*d {
		return fmt.Errorf("prefill: %d embedding values for %d tokens of width %d", len(emb), len(ids), d)
	}
	if s.State.Pos+len(ids) > c.MaxPositions {
		return fmt.Errorf("%w: %d tokens + %d already cached > %d", ErrContext, len(ids), s.State.Pos, c.MaxPositions)
	}
	step := s.R.Opt.MaxChunk
	for i := 0; i < len(ids); i += step {
		j := min(len(ids), i+step)
		if err := s.R.ForwardEmbeddings(s.State, emb[i*d:j*d], j-i, s.logits); err != nil {
			return err
		}
	}
	s.history = append(s.history, ids...)
	return nil
}

// Logits returns the logits after the last Prefill or Step.
func (s *Session) Logits() []float32 { return s.logits }

// Step feeds one token (decode).
func (s *Session) Step(tok int) error {
	var one [1]int
	one[0] = tok
	if err := s.R.Forward(s.State, one[:], s.logits); err != nil {
		return err
	}
	s.history = append(s.history, tok)
	return nil
}

// Generate prefills prompt and then yields sampled tokens until a stop
// token, MaxTokens, the end of the context, or the consumer stops. The
// error, if any, is yielded last with token −1.
func (s *Session) Generate(prompt []int, opt Options) iter.Seq2[int, error] {
	return s.generate(len(prompt), func() error { return s.Prefill(prompt) }, opt)
}

// GenerateEmbedded is Generate for a prompt given with its input
// embeddings (see PrefillEmbeddings).
func (s *Session) GenerateEmbedded(ids []int, emb []float32, opt Options) iter.Seq2[int, error] {
	return s.generate(len(ids), func() error { return s.PrefillEmbeddings(ids, emb) }, opt)
}

func (s *Session) generate(n int, prefill func() error, opt Options) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		if err := opt.Sampler.Validate(); err != nil {
			yield(-1, err)
			return
		}
		if n == 0 {
			yield(-1, errors.New("empty prompt"))
			return
		}
		if err := prefill(); err != nil {
			yield(-1, err)
			return
		}
		smp := NewSampler(opt.Sampler, len(s.logits))
		ctx := s.R.M.Cfg.MaxPositions
		logits := s.logits
		if opt.Vocab > 0 && opt.Vocab < len(logits) {
			logits = logits[:opt.Vocab]
		}
		for n := 0; opt.MaxTokens <= 0 || n < opt.MaxTokens; n++ {
			tok := smp.Sample(logits, s.history)
			for _, st := range opt.Stop {
				if tok == st {
					return
				}
			}
			if !yield(tok, nil) {
				return
			}
			if s.State.Pos >= ctx {
				return
			}
			if err := s.Step(tok); err != nil {
				yield(-1, err)
				return
			}
		}
	}
}

// History returns every token fed to the sequence so far (prompt pieces
// and generated tokens that were stepped).
func (s *Session) History() []int { return s.history }

// Reset empties the sequence (state and history), keeping its memory.
func (s *Session) Reset() {
	s.State.Reset()
	s.history = s.history[:0]
}
