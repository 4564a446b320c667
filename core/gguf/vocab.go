package gguf

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/core/config"
)

// llama.cpp token types (enum llama_token_type / gguf-py TokenType).
const (
	tokenNormal      int32 = 1
	tokenControl     int32 = 3
	tokenUserDefined int32 = 4
	tokenUnused      int32 = 5
)

// hfTokenizer is the part of a Hugging Face tokenizer.json Export reads.
type hfTokenizer struct {
	Model struct {
		Type                    string          `json:"type"`
		Vocab                   json.RawMessage `json:"vocab"`
		Merges                  json.RawMessage `json:"merges"`
		ByteFallback            bool            `json:"byte_fallback"`
		IgnoreMerges            bool            `json:"ignore_merges"`
		ContinuingSubwordPrefix string          `json:"continuing_subword_prefix"`
		EndOfWordSuffix         string          `json:"end_of_word_suffix"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int    `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
}

// addVocab writes the tokenizer.* keys: a GPT-2-style byte-level BPE
// vocabulary from tokenizer.json, or an id-only vocabulary ("none"; the
// vocabulary size is {arch}.vocab_size) when there is none or noVocab.
func addVocab(w *Writer, dir string, cfg *config.Config, noVocab bool) error {
	path := filepath.Join(dir, "tokenizer.json")
	raw, err := os.ReadFile(path)
	if noVocab || errors.Is(err, fs.ErrNotExist) {
		return w.Add("tokenizer.ggml.model", "none")
	}
	if err != nil {
		return err
	}
	kvs, err := bpeVocab(dir, raw, cfg)
	if err != nil {
		return fmt.Errorf("%s: %w (export with --no-vocab for an id-only GGUF)", path, err)
	}
	for _, kv := range kvs {
		if err := w.Add(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return nil
}

// bpeVocab converts a byte-level BPE tokenizer.json into llama.cpp's "gpt2"
// vocabulary with the "gpt-2" pre-tokenizer (the GPT-2 split regex that
// ByteLevel with use_regex applies). Other tokenizers are refused by name.
func bpeVocab(dir string, raw []byte, cfg *config.Config) ([]KV, error) {
	var t hfTokenizer
	if err := json.Unmarshal(raw, &t); err != nil {
		return nil, fmt.Errorf("not a tokenizer.json: %w", err)
	}
	m := t.Model
	switch {
	case m.Type != "BPE":
		return nil, refuse("tokenizer.json model.type", "%q is not byte-level BPE", m.Type)
	case m.ByteFallback:
		return nil, refuse("tokenizer.json model.byte_fallback", "true is a SentencePiece-style BPE, not byte-level")
	case m.IgnoreMerges:
		return nil, refuse("tokenizer.json model.ignore_merges", "true is not supported by llama.cpp's gpt-2 pre-tokenizer")
	case m.ContinuingSubwordPrefix != "" || m.EndOfWordSuffix != "":
		return nil, refuse("tokenizer.json model.continuing_subword_prefix/end_of_word_suffix", "must be empty for byte-level BPE")
	}
	if n := bytes.TrimSpace(t.Normalizer); len(n) > 0 && !bytes.Equal(n, []byte("null")) {
		return nil, refuse("tokenizer.json normalizer", "%s is not supported (llama.cpp's gpt-2 vocabulary has no normalizer)", n)
	}
	var pre struct {
		Type           string `json:"type"`
		AddPrefixSpace bool   `json:"add_prefix_space"`
		UseRegex       *bool  `json:"use_regex"`
	}
	if err := json.Unmarshal(t.PreTokenizer, &pre); err != nil || pre.Type != "ByteLevel" || pre.AddPrefixSpace || (pre.UseRegex != nil && !*pre.UseRegex) {
		return nil, refuse("tokenizer.json pre_tokenizer", "%s is not ByteLevel{add_prefix_space: false, use_regex: true} (the only pre-tokenizer mapped, to llama.cpp's gpt-2)", bytes.TrimSpace(t.PreTokenizer))
	}
	var vocab map[string]int
	if err := json.Unmarshal(m.Vocab, &vocab); err != nil {
		return nil, refuse("tokenizer.json model.vocab", "not an object of token → id: %v", err)
	}
	merges, err := parseMerges(m.Merges)
	if err != nil {
		return nil, err
	}
	V := cfg.VocabSize
	tokens := make([]string, V)
	types := make([]int32, V)
	set := make([]bool, V)
	put := func(id int, s string, typ int32) error {
		if id < 0 || id >= V {
			return refuse("tokenizer.json", "token %q has id %d outside the model's vocab_size %d", s, id, V)
		}
		tokens[id], types[id], set[id] = s, typ, true
		return nil
	}
	for s, id := range vocab {
		if err := put(id, s, tokenNormal); err != nil {
			return nil, err
		}
	}
	for _, a := range t.AddedTokens {
		typ := tokenUserDefined
		if a.Special {
			typ = tokenControl
		}
		if err := put(a.ID, a.Content, typ); err != nil {
			return nil, err
		}
	}
	for id := range tokens {
		if !set[id] { // as llama.cpp's converter pads a short vocabulary
			tokens[id], types[id] = fmt.Sprintf("[PAD%d]", id), tokenUnused
		}
	}
	kvs := []KV{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.pre", "gpt-2"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.token_type", types},
		{"tokenizer.ggml.merges", merges},
	}
	if cfg.BOSTokenID >= 0 && cfg.BOSTokenID < V {
		kvs = append(kvs, KV{"tokenizer.ggml.bos_token_id", uint32(cfg.BOSTokenID)})
	}
	if len(cfg.EOSTokenIDs) > 0 && cfg.EOSTokenIDs[0] >= 0 && cfg.EOSTokenIDs[0] < V {
		kvs = append(kvs, KV{"tokenizer.ggml.eos_token_id", uint32(cfg.EOSTokenIDs[0])})
	}
	// tessera adds no BOS (the Kimi template has none); llama.cpp should not either.
	kvs = append(kvs, KV{"tokenizer.ggml.add_bos_token", false})
	if tmpl := chatTemplate(dir, tokens); tmpl != "" {
		kvs = append(kvs, KV{"tokenizer.chat_template", tmpl})
	}
	return kvs, nil
}

// kimiChatTemplate renders the Kimi chat format as tessera's
// tokenizer.RenderKimi does (text turns; a default system turn when the
// conversation has none), for llama.cpp's and Ollama's chat modes.
const kimiChatTemplate = `{%- if not messages or messages[0]['role'] != 'system' -%}
<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>
{%- endif -%}
{%- for m in messages -%}
{%- if m['role'] == 'user' -%}<|im_user|>
{%- elif m['role'] == 'assistant' -%}<|im_assistant|>
{%- else -%}<|im_system|>
{%- endif -%}
{{ m['role'] }}<|im_middle|>{{ m['content'] }}<|im_end|>
{%- endfor -%}
{%- if add_generation_prompt -%}<|im_assistant|>assistant<|im_middle|>{%- endif -%}`

// chatTemplate is tokenizer_config.json's chat_template when it has one,
// else the Kimi template when the vocabulary has the Kimi chat markers.
func chatTemplate(dir string, tokens []string) string {
	if b, err := os.ReadFile(filepath.Join(dir, "tokenizer_config.json")); err == nil {
		var tc struct {
			ChatTemplate any `json:"chat_template"`
		}
		if json.Unmarshal(b, &tc) == nil {
			if s, ok := tc.ChatTemplate.(string); ok && s != "" {
				return s
			}
		}
	}
	have := map[string]bool{}
	for _, t := range tokens {
		have[t] = true
	}
	for _, m := range []string{"<|im_system|>", "<|im_user|>", "<|im_assistant|>", "<|im_middle|>", "<|im_end|>"} {
		if !have[m] {
			return ""
		}
	}
	return kimiChatTemplate
}

// parseMerges reads merges as ["a b", …] or [["a", "b"], …].
func parseMerges(raw json.RawMessage) ([]string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, refuse("tokenizer.json model.merges", "missing")
	}
	var flat []string
	if err := json.Unmarshal(raw, &flat); err == nil {
		return flat, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, refuse("tokenizer.json model.merges", "neither strings nor pairs of strings")
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, refuse("tokenizer.json model.merges", "entry %d has %d parts, want 2", i, len(p))
		}
		out[i] = p[0] + " " + p[1]
	}
	return out, nil
}
