package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"unicode/utf8"
)

// Codec turns text into token ids and ids back into text, streaming. It is
// either a model's tokenizer or, for models shipped without one, the
// byte-level fallback (id b < 256 is the byte b).
type Codec interface {
	Encode(s string) ([]int, error)
	// Stream returns a streaming detokenizer.
	Stream() TokenStream
	// TokenID looks up a special token such as <|im_end|>.
	TokenID(s string) (int, bool)
	// Vocab is the number of ids the codec can decode.
	Vocab() int
	// Name describes the codec for people.
	Name() string
}

// TokenStream is a streaming detokenizer: Add never returns a broken UTF-8
// sequence; Flush returns what is held back.
type TokenStream interface {
	Add(id int) (string, error)
	Flush() string
}

// LoadCodec returns the model directory's tokenizer (tokenizer.json or
// tiktoken.model) or, when it has none, the byte-level fallback for a model
// of vocab ids. A tokenizer with more ids than the model is an error.
func LoadCodec(dir string, vocab int) (Codec, error) {
	for _, f := range []string{"tokenizer.json", "tiktoken.model"} {
		p := filepath.Join(dir, f)
		if _, err := os.Stat(p); err == nil {
			t, err := Load(dir)
			if err != nil {
				return nil, err
			}
			if t.Vocab() > vocab {
				return nil, fmt.Errorf("%s: tokenizer has %d tokens but the model's vocab_size is %d", p, t.Vocab(), vocab)
			}
			return NewCodec(t, f), nil
		}
	}
	return ByteCodec{VocabSize: vocab}, nil
}

// NewCodec wraps a loaded tokenizer as a Codec; name says where it came
// from (e.g. "tokenizer.json").
func NewCodec(t *Tokenizer, name string) Codec { return tokCodec{t, name} }

type tokCodec struct {
	t    *Tokenizer
	file string
}

func (c tokCodec) Encode(s string) ([]int, error) { return c.t.Encode(s), nil }
func (c tokCodec) Stream() TokenStream            { return c.t.NewStream() }
func (c tokCodec) TokenID(s string) (int, bool)   { return c.t.TokenID(s) }
func (c tokCodec) Vocab() int                     { return c.t.Vocab() }
func (c tokCodec) Name() string                   { return fmt.Sprintf("%s (%d tokens)", c.file, c.t.Vocab()) }

// ByteCodec is the fallback for models without a tokenizer: token id b < 256
// is the byte b; larger ids print as <|id|>.
type ByteCodec struct{ VocabSize int }

// Encode maps each byte of s to its id.
func (c ByteCodec) Encode(s string) ([]int, error) {
	if c.VocabSize < 256 {
		return nil, fmt.Errorf("text input needs a tokenizer: the model has no tokenizer.json and its vocabulary (%d) is too small for byte ids; give token ids instead", c.VocabSize)
	}
	ids := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		ids[i] = int(s[i])
	}
	return ids, nil
}

// Stream returns a streaming decoder that holds back incomplete UTF-8.
func (c ByteCodec) Stream() TokenStream { return &byteStream{} }

// TokenID knows no special tokens.
func (c ByteCodec) TokenID(string) (int, bool) { return 0, false }

// Vocab is the model's vocabulary.
func (c ByteCodec) Vocab() int { return c.VocabSize }

// Name describes the fallback.
func (c ByteCodec) Name() string { return "byte-level fallback (no tokenizer.json)" }

type byteStream struct{ pending []byte }

// Add returns the text completed by token id: bytes for ids < 256 (held
// back until they form whole UTF-8 characters), "<|id|>" for others.
func (s *byteStream) Add(id int) (string, error) {
	if id >= 256 || id < 0 {
		return s.Flush() + fmt.Sprintf("<|%d|>", id), nil
	}
	s.pending = append(s.pending, byte(id))
	n := 0
	for n < len(s.pending) {
		r, size := utf8.DecodeRune(s.pending[n:])
		if r == utf8.RuneError && size <= 1 && !utf8.FullRune(s.pending[n:]) {
			break // incomplete sequence: wait for more bytes
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
