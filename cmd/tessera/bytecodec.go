package main

import (
	"fmt"
	"unicode/utf8"
)

// byteCodec is the fallback text codec for models without a tokenizer:
// token id b < 256 is the byte b. Streaming holds back incomplete UTF-8.
type byteCodec struct{ vocab int }

func newByteCodec(vocab int) byteCodec { return byteCodec{vocab} }

// Encode maps each byte of s to its id.
func (c byteCodec) Encode(s string) ([]int, error) {
	if c.vocab < 256 {
		return nil, fmt.Errorf("--prompt needs a tokenizer: the model has no tokenizer.json and its vocabulary (%d) is too small for byte ids; use --tokens", c.vocab)
	}
	ids := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int(s[i])
	}
	return ids, nil
}

type byteStream struct{ pending []byte }

// Stream returns a streaming decoder.
func (c byteCodec) Stream() *byteStream { return &byteStream{} }

// Add returns the text completed by token id: bytes for ids < 256 (held
// back until they form whole UTF-8 characters), "<|id|>" for others.
func (s *byteStream) Add(id int) string {
	if id >= 256 || id < 0 {
		out := s.Flush()
		return out + fmt.Sprintf("<|%d|>", id)
	}
	s.pending = append(s.pending, byte(id))
	n := 0
	for n < len(s.pending) {
		r, size := utf8.DecodeRune(s.pending[n:])
		if r == utf8.RuneError && size <= 1 {
			if !utf8.FullRune(s.pending[n:]) {
				break // incomplete sequence: wait for more bytes
			}
		}
		n += size
	}
	out := string(s.pending[:n])
	s.pending = s.pending[n:]
	return out
}

// Flush returns whatever is held back.
func (s *byteStream) Flush() string {
	out := string(s.pending)
	s.pending = s.pending[:0]
	return out
}
