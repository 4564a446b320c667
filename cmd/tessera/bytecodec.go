package main

import (
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

// textCodec turns text into token ids and ids back into text, streaming.
type textCodec interface {
	Encode(s string) ([]int, error)
	Stream() tokenStream
	// TokenID looks up a special token such as <|im_end|>.
	TokenID(s string) (int, bool)
	// Vocab is the number of ids the codec can decode.
	Vocab() int
}

// tokenStream is a streaming detokenizer: Add never returns a broken UTF-8
// sequence; Flush returns what is held back.
type tokenStream interface {
	Add(id int) (string, error)
	Flush() string
}

// loadCodec returns the model directory's tokenizer (tokenizer.json or
// tiktoken.model) or, when it has none, the byte-level fallback.
func loadCodec(dir string, vocab int) (textCodec, error) {
	for _, f := range []string{"tokenizer.json", "tiktoken.model"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
			t, err := tokenizer.Load(dir)
			if err != nil {
				return nil, err
			}
			if t.Vocab() > vocab {
				return nil, fmt.Errorf("%s: tokenizer has %d tokens but the model's vocab_size is %d", filepath.Join(dir, f), t.Vocab(), vocab)
			}
			return tokCodec{t}, nil
		}
	}
	return newByteCodec(vocab), nil
}

type tokCodec struct{ t *tokenizer.Tokenizer }

func (c tokCodec) Encode(s string) ([]int, error) { return c.t.Encode(s), nil }
func (c tokCodec) Stream() tokenStream            { return c.t.NewStream() }
func (c tokCodec) TokenID(s string) (int, bool)   { return c.t.TokenID(s) }

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
func (c byteCodec) Stream() tokenStream { return &byteStream{} }

// Vocab is the model's vocabulary: ids ≥ 256 print as <|id|>.
func (c byteCodec) Vocab() int { return c.vocab }

// TokenID knows no special tokens.
func (c byteCodec) TokenID(string) (int, bool) { return 0, false }

// Add returns the text completed by token id: bytes for ids < 256 (held
// back until they form whole UTF-8 characters), "<|id|>" for others.
func (s *byteStream) Add(id int) (string, error) {
	if id >= 256 || id < 0 {
		out := s.Flush()
		return out + fmt.Sprintf("<|%d|>", id), nil
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
	return out, nil
}

// Flush returns whatever is held back.
func (s *byteStream) Flush() string {
	out := string(s.pending)
	s.pending = s.pending[:0]
	return out
}

// Vocab is the number of ids the tokenizer knows.
func (c tokCodec) Vocab() int { return c.t.Vocab() }
