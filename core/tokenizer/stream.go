package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// Stream turns ids into text one at a time, as a model generates them.
type Stream struct {
	t       *Tokenizer
	pending []byte
	strip   int // leading decoder-Strip copies still to remove
}

// NewStream returns a streaming detokenizer. The concatenation of what Add
// and Flush return equals Decode of all the ids given to Add.
func (t *Tokenizer) NewStream() *Stream { return &Stream{t: t, strip: t.stripStart} }

// Add decodes one more id. It returns the text that is now complete: a
// UTF-8 character split across tokens is held back until its last byte
// arrives, so a valid character is never cut in two. Bytes that can never
// form a valid character are passed through as Decode passes them. An id
// outside the vocabulary is an error naming it, and nothing is consumed.
func (s *Stream) Add(id int) (string, error) {
	tb, err := s.t.tokenBytes(id)
	if err != nil {
		return "", err
	}
	s.pending = append(s.pending, tb...)
	if s.strip > 0 && s.t.stripContent != "" {
		c := s.t.stripContent
		for s.strip > 0 && len(s.pending) > 0 {
			switch {
			case strings.HasPrefix(string(s.pending), c):
				s.pending = s.pending[len(c):]
				s.strip--
			case strings.HasPrefix(c, string(s.pending)):
				return "", nil // could still become a strippable prefix
			default:
				s.strip = 0
			}
		}
	}
	cut := completePrefix(s.pending)
	out := string(s.pending[:cut])
	s.pending = append(s.pending[:0], s.pending[cut:]...)
	return out, nil
}

// Flush returns whatever is held back (an incomplete trailing character)
// and resets the stream for reuse.
func (s *Stream) Flush() string {
	out := string(s.pending)
	s.pending = s.pending[:0]
	s.strip = s.t.stripStart
	return out
}

// completePrefix returns the length of b without a trailing incomplete (but
// so far valid) UTF-8 sequence.
func completePrefix(b []byte) int {
	for back := 1; back <= utf8.UTFMax-1 && back <= len(b); back++ {
		c := b[len(b)-back]
		if c < 0x80 {
			return len(b) // ASCII: nothing pending
		}
		if c >= 0xC0 { // a lead byte
			if !utf8.FullRune(b[len(b)-back:]) {
				return len(b) - back
			}
			return len(b)
		}
	}
	return len(b)
}
