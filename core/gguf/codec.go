package gguf

import (
	"encoding/json"
	"fmt"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

// LoadCodec returns the text codec of the GGUF file at path: its
// vocabulary as a byte-level BPE tokenizer when tokenizer.ggml.model is
// "gpt2" (the vocabulary Export writes), else tokenizer.ByteCodec over the
// model's vocab ids.
func LoadCodec(path string, vocab int) (tokenizer.Codec, error) {
	f, err := Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := Codec(f, vocab)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Codec is the text codec of f's vocabulary (LoadCodec for a parsed
// file): the byte-level BPE tokenizer of a "gpt2" vocabulary, else
// tokenizer.ByteCodec over the model's vocab ids.
func Codec(f *File, vocab int) (tokenizer.Codec, error) {
	t, err := Tokenizer(f)
	if err != nil {
		return nil, err
	}
	if t == nil {
		return tokenizer.ByteCodec{VocabSize: vocab}, nil
	}
	if t.Vocab() > vocab {
		return nil, fmt.Errorf("tokenizer has %d tokens but the model's vocab_size is %d", t.Vocab(), vocab)
	}
	return tokenizer.NewCodec(t, "gguf vocab"), nil
}

// Tokenizer builds the tokenizer of f's "gpt2" vocabulary (tokens, token
// types, merges; pre-tokenizer "gpt-2", i.e. byte-level with the GPT-2
// split regex). Normal tokens form the BPE vocabulary, control tokens are
// special added tokens, user-defined tokens plain added tokens, unused
// (padding) tokens are left out. It returns nil without error when f has
// no vocabulary ("none" or absent); other models are refused by name.
func Tokenizer(f *File) (*tokenizer.Tokenizer, error) {
	mv, _ := f.Get("tokenizer.ggml.model")
	switch mv {
	case nil, "none":
		return nil, nil
	case "gpt2":
	default:
		return nil, fmt.Errorf("tokenizer.ggml.model %q: only \"gpt2\" (byte-level BPE) vocabularies are read", mv)
	}
	if pre, ok := f.Get("tokenizer.ggml.pre"); ok && pre != "gpt-2" && pre != "default" {
		return nil, fmt.Errorf("tokenizer.ggml.pre %q: only the gpt-2 pre-tokenizer is read", pre)
	}
	tv, _ := f.Get("tokenizer.ggml.tokens")
	tokens, ok := tv.([]string)
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.tokens: missing or %T, want an array of strings", tv)
	}
	var types []int32
	if v, ok := f.Get("tokenizer.ggml.token_type"); ok {
		if types, ok = v.([]int32); !ok || len(types) != len(tokens) {
			return nil, fmt.Errorf("tokenizer.ggml.token_type: want %d int32 values", len(tokens))
		}
	}
	mv2, _ := f.Get("tokenizer.ggml.merges")
	merges, _ := mv2.([]string)
	type added struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	}
	vocab := make(map[string]int, len(tokens))
	var add []added
	for id, s := range tokens {
		typ := tokenNormal
		if types != nil {
			typ = types[id]
		}
		switch typ {
		case tokenControl:
			add = append(add, added{id, s, true})
		case tokenUserDefined:
			add = append(add, added{id, s, false})
		case tokenUnused:
		default:
			vocab[s] = id
		}
	}
	js := map[string]any{
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
		"added_tokens":  add,
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
	}
	raw, err := json.Marshal(js)
	if err != nil {
		return nil, err
	}
	t, err := tokenizer.FromJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("gguf vocabulary: %w", err)
	}
	return t, nil
}
