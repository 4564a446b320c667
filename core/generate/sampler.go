// Package generate turns a model into text: chunked prefill, the decode
// loop with its sampler, stop conditions and streaming of tokens.
package generate

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
)

// SamplerOptions configure token sampling. The zero value is greedy.
type SamplerOptions struct {
	// Temperature divides the logits; 0 selects greedy (argmax) decoding.
	Temperature float32
	// TopK keeps the K most likely tokens (0: all).
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability
	// sums to at least TopP (0 or 1: all).
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely (0: off).
	MinP float32
	// RepetitionPenalty (> 1 discourages repeats; 0 or 1: off) divides
	// positive and multiplies negative logits of tokens already seen, as in
	// the CTRL paper and Hugging Face's RepetitionPenaltyLogitsProcessor.
	RepetitionPenalty float32
	// Seed makes sampling deterministic.
	Seed uint64
	// LogitBias is added to the listed tokens' logits before anything else
	// (OpenAI's logit_bias): each bias in [−100, 100], where −100 (BanBias)
	// bans the token. A token appears at most once.
	LogitBias []TokenBias
}

// TokenBias is one entry of SamplerOptions.LogitBias: Bias is added to
// token ID's logit (BanBias sets it to −∞).
type TokenBias struct {
	ID   int
	Bias float32
}

// BanBias is the logit bias that bans a token, as in OpenAI's API: the
// token's logit becomes −∞ rather than 100 less.
const BanBias = -100

// Bans reports whether b bans its token (Bias ≤ BanBias): the one rule
// the host sampler (−∞) and a device sampler (its finite stand-in) apply.
func (b TokenBias) Bans() bool { return b.Bias <= BanBias }

// Validate reports options out of range, naming the option.
func (o SamplerOptions) Validate() error {
	switch {
	case o.Temperature < 0 || math.IsNaN(float64(o.Temperature)):
		return fmt.Errorf("temperature must be ≥ 0, got %g", o.Temperature)
	case o.TopK < 0:
		return fmt.Errorf("top-k must be ≥ 0, got %d", o.TopK)
	case o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("top-p must be in [0, 1], got %g", o.TopP)
	case o.MinP < 0 || o.MinP > 1:
		return fmt.Errorf("min-p must be in [0, 1], got %g", o.MinP)
	case o.RepetitionPenalty < 0:
		return fmt.Errorf("repetition penalty must be ≥ 0, got %g", o.RepetitionPenalty)
	}
	var seen map[int]bool // made once per validation, never per token
	for _, b := range o.LogitBias {
		switch {
		case b.ID < 0:
			return fmt.Errorf("logit bias: token id %d is negative", b.ID)
		case !(b.Bias >= BanBias && b.Bias <= -BanBias):
			return fmt.Errorf("logit bias of token %d must be in [%d, %d], got %g", b.ID, BanBias, -BanBias, b.Bias)
		case seen[b.ID]:
			return fmt.Errorf("logit bias: token %d is listed twice", b.ID)
		}
		if seen == nil {
			seen = make(map[int]bool, len(o.LogitBias))
		}
		seen[b.ID] = true
	}
	return nil
}

// ValidateVocab is Validate for sampling from vocab logits: the logit
// bias must name tokens below vocab and must not ban all of them.
func (o SamplerOptions) ValidateVocab(vocab int) error {
	if err := o.Validate(); err != nil {
		return err
	}
	bans := 0
	for _, b := range o.LogitBias {
		if b.ID >= vocab {
			return fmt.Errorf("logit bias: token %d is outside the vocabulary [0, %d)", b.ID, vocab)
		}
		if b.Bans() {
			bans++
		}
	}
	if vocab > 0 && bans >= vocab {
		return fmt.Errorf("logit bias bans all %d tokens of the vocabulary", vocab)
	}
	return nil
}

// Bias applies the logit bias to logits in place (ids outside logits
// are skipped; ValidateVocab rejects them).
func (o SamplerOptions) Bias(logits []float32) {
	for _, b := range o.LogitBias {
		if b.ID >= len(logits) {
			continue
		}
		if b.Bans() {
			logits[b.ID] = float32(math.Inf(-1))
		} else {
			logits[b.ID] += b.Bias
		}
	}
}

// Penalizes reports whether the options apply a repetition penalty (one
// other than 0 or 1). It is the one rule for it: the host sampler applies
// the penalty exactly then, and a device sampler, which has no history,
// declines exactly then (DeviceSampler.SamplesOnDevice).
func (o SamplerOptions) Penalizes() bool {
	return o.RepetitionPenalty > 0 && o.RepetitionPenalty != 1
}

// Sampler picks the next token from logits. It owns its buffers (sized
// for the vocabulary once), so sampling allocates nothing.
type Sampler struct {
	Opt   SamplerOptions
	rng   *rand.Rand
	cands []cand
	seen  []uint32 // generation stamp per token, for de-duplicating history
	stamp uint32
}

type cand struct {
	id int32
	v  float32
}

// NewSampler returns a sampler for a vocabulary of vocab tokens.
func NewSampler(opt SamplerOptions, vocab int) *Sampler {
	return &Sampler{
		Opt:   opt,
		rng:   rand.New(rand.NewPCG(opt.Seed, 0x7e55e7a)),
		cands: make([]cand, vocab),
		seen:  make([]uint32, vocab),
	}
}

// Sample returns the next token for logits (modified in place by the
// logit bias, the repetition penalty and temperature); history lists the
// tokens so far.
func (s *Sampler) Sample(logits []float32, history []int) int {
	o := s.Opt
	o.Bias(logits)
	if o.Penalizes() {
		s.stamp++
		for _, id := range history {
			if id < 0 || id >= len(logits) || s.seen[id] == s.stamp {
				continue
			}
			s.seen[id] = s.stamp
			if logits[id] > 0 {
				logits[id] /= o.RepetitionPenalty
			} else {
				logits[id] *= o.RepetitionPenalty
			}
		}
	}
	if o.Temperature == 0 {
		return Argmax(logits)
	}
	return s.pick(logits, s.Draw())
}

// Draw returns the sampler's next uniform draw in [0, 1): Sample takes one
// per sampled token (none when greedy); a backend that samples on the
// device (DeviceSampler) is given the same draws, so a seed picks the
// same tokens on every backend.
func (s *Sampler) Draw() float64 { return s.rng.Float64() }

// SampleDraw is Sample with the draw given (u in [0, 1)) instead of taken
// from the sampler's generator; the repetition penalty is not applied.
// It is the reference a device sampler is tested against.
func (s *Sampler) SampleDraw(logits []float32, u float64) int {
	s.Opt.Bias(logits)
	if s.Opt.Temperature == 0 {
		return Argmax(logits)
	}
	return s.pick(logits, u)
}

// pick draws from logits (temperature, top-k, min-p, top-p) with draw u.
func (s *Sampler) pick(logits []float32, u float64) int {
	o := s.Opt
	c := s.cands[:len(logits)]
	for i, v := range logits {
		c[i] = cand{int32(i), v / o.Temperature}
	}
	byLogit := func(a, b cand) int {
		if r := cmp.Compare(b.v, a.v); r != 0 {
			return r
		}
		return cmp.Compare(a.id, b.id)
	}
	if o.TopK > 0 && o.TopK < len(c) {
		selectTop(c, o.TopK)
		c = c[:o.TopK]
	}
	slices.SortFunc(c, byLogit)
	// Softmax over the candidates (stable: subtract the max).
	m := c[0].v
	var sum float64
	for i := range c {
		p := math.Exp(float64(c[i].v - m))
		c[i].v = float32(p)
		sum += p
	}
	n := len(c)
	if o.MinP > 0 {
		thr := float64(o.MinP) * float64(c[0].v) // c[0] holds exp(0) = 1 before normalising
		k := 1
		for k < n && float64(c[k].v) >= thr {
			k++
		}
		n = k
	}
	if o.TopP > 0 && o.TopP < 1 {
		var cum float64
		k := 0
		for k < n {
			cum += float64(c[k].v) / sum
			k++
			if cum >= float64(o.TopP) {
				break
			}
		}
		n = k
	}
	var total float64
	for i := 0; i < n; i++ {
		total += float64(c[i].v)
	}
	u *= total
	for i := 0; i < n; i++ {
		u -= float64(c[i].v)
		if u < 0 {
			return int(c[i].id)
		}
	}
	return int(c[n-1].id)
}

// Argmax returns the index of the largest value (the lowest index on ties).
func Argmax(x []float32) int {
	best := 0
	for i, v := range x {
		if v > x[best] {
			best = i
		}
	}
	return best
}

// selectTop partially orders c so its first k entries are the k largest
// (quickselect with a deterministic median-of-three pivot).
func selectTop(c []cand, k int) {
	less := func(a, b cand) bool { return a.v > b.v || (a.v == b.v && a.id < b.id) }
	lo, hi := 0, len(c)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if less(c[mid], c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if less(c[hi], c[lo]) {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if less(c[hi], c[mid]) {
			c[hi], c[mid] = c[mid], c[hi]
		}
		p := c[mid]
		i, j := lo, hi
		for i <= j {
			for less(c[i], p) {
				i++
			}
			for less(p, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case k-1 <= j:
			hi = j
		case k-1 >= i:
			lo = i
		default:
			return
		}
	}
}
