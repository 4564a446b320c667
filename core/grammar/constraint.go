package grammar

import (
	"fmt"
	"math"
	"strings"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

// Tokens is the text of every token of a vocabulary, for masking.
type Tokens struct {
	Text []string
	// usable marks tokens a JSON document may contain: not special
	// (control) tokens.
	usable []bool
}

// NewTokens reads the bytes of every token of codec (a token may hold part
// of a UTF-8 character: the grammar checks that strings stay valid UTF-8).
// Special tokens (spelled like <|…|> or [WORD], mapping back to their id)
// are left out of constrained output.
func NewTokens(codec tokenizer.Codec) *Tokens {
	n := codec.Vocab()
	t := &Tokens{Text: make([]string, n), usable: make([]bool, n)}
	for id := 0; id < n; id++ {
		st := codec.Stream()
		a, err := st.Add(id)
		if err != nil {
			continue
		}
		s := a + st.Flush()
		t.Text[id] = s
		special := len(s) > 2 && ((strings.HasPrefix(s, "<|") && strings.HasSuffix(s, "|>")) || (s[0] == '[' && s[len(s)-1] == ']' && !strings.ContainsAny(s, " \",")))
		if special {
			if sid, ok := codec.TokenID(s); !ok || sid != id {
				special = false
			}
		}
		t.usable[id] = s != "" && !special
	}
	return t
}

// Constraint applies a grammar to one generation: Mask before each
// sample, Accept after.
type Constraint struct {
	g     *Grammar
	tok   *Tokens
	stops []int
	keep  []float32 // the stop tokens' logits while the rest is masked
	st    state
	buf   []frame
}

// NewConstraint starts g on the token texts tok; stops are the tokens
// that end the generation (allowed once the document is complete).
func NewConstraint(g *Grammar, tok *Tokens, stops []int) (*Constraint, error) {
	if len(stops) == 0 {
		return nil, fmt.Errorf("grammar: the model has no stop token to end a constrained output")
	}
	return &Constraint{g: g, tok: tok, stops: stops, st: newState(g.root)}, nil
}

// MinTokens is the fewest tokens a document can take (one byte per token
// in the worst case).
func (c *Constraint) MinTokens() int { return c.st.cost() }

// Mask sets the logits of tokens that may not come next to −Inf: tokens
// that do not continue the document, and tokens after which the shortest
// completion no longer fits in left−1 tokens (left counts this one). Once
// the document is complete only the stop tokens remain.
func (c *Constraint) Mask(logits []float32, left int) {
	ninf := float32(math.Inf(-1))
	if c.st.complete() {
		c.keep = c.keep[:0]
		for _, s := range c.stops {
			if s < len(logits) {
				c.keep = append(c.keep, logits[s])
			}
		}
		if !c.st.done { // a root number may still grow
			c.maskTokens(logits, left, ninf)
		} else {
			for i := range logits {
				logits[i] = ninf
			}
		}
		i := 0
		for _, s := range c.stops {
			if s < len(logits) {
				logits[s] = c.keep[i]
				i++
			}
		}
		return
	}
	c.maskTokens(logits, left, ninf)
	for _, s := range c.stops {
		if s < len(logits) {
			logits[s] = ninf
		}
	}
}

func (c *Constraint) maskTokens(logits []float32, left int, ninf float32) {
	any := false
	for id := range logits {
		if id >= len(c.tok.Text) || !c.tok.usable[id] {
			logits[id] = ninf
			continue
		}
		s := c.st.clone(c.buf)
		ok := true
		text := c.tok.Text[id]
		for i := 0; i < len(text) && ok; i++ {
			ok = s.feed(text[i])
		}
		c.buf = s.stack[:0]
		if !ok || s.cost() > left-1 {
			logits[id] = ninf
			continue
		}
		any = true
	}
	if !any { // no token fits (a vocabulary without single-byte tokens): end
		for _, s := range c.stops {
			if s < len(logits) {
				logits[s] = 0
			}
		}
	}
}

// Accept advances the document by token id.
func (c *Constraint) Accept(id int) error {
	for _, s := range c.stops {
		if id == s {
			return nil
		}
	}
	if id < 0 || id >= len(c.tok.Text) {
		return fmt.Errorf("grammar: token %d outside the vocabulary", id)
	}
	text := c.tok.Text[id]
	for i := 0; i < len(text); i++ {
		if !c.st.feed(text[i]) {
			return fmt.Errorf("grammar: token %d (%q) does not continue the document", id, text)
		}
	}
	return nil
}

// Complete reports whether the document is complete.
func (c *Constraint) Complete() bool { return c.st.complete() }
