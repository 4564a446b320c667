package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Load reads a tokenizer from a file or a model directory:
//
//   - a directory with tokenizer.json (Hugging Face), else tiktoken.model
//     (+ tokenizer_config.json for special tokens, Kimi pre-tokenisation),
//     else encoder.json + vocab.bpe (GPT-2);
//   - a tokenizer.json file (any *.json with a "model" section);
//   - a tiktoken file (anything else), with tokenizer_config.json from the
//     same directory when present.
func Load(path string) (*Tokenizer, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if st.IsDir() {
		if p := filepath.Join(path, "tokenizer.json"); exists(p) {
			return loadFile(p)
		}
		if p := filepath.Join(path, "tiktoken.model"); exists(p) {
			return loadFile(p)
		}
		enc, bpe := filepath.Join(path, "encoder.json"), filepath.Join(path, "vocab.bpe")
		if exists(enc) && exists(bpe) {
			e, err := os.ReadFile(enc)
			if err != nil {
				return nil, fmt.Errorf("tokenizer: %w", err)
			}
			v, err := os.ReadFile(bpe)
			if err != nil {
				return nil, fmt.Errorf("tokenizer: %w", err)
			}
			return FromGPT2(e, v)
		}
		return nil, fmt.Errorf("tokenizer: directory %s has no tokenizer.json, tiktoken.model or encoder.json+vocab.bpe", path)
	}
	return loadFile(path)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

func loadFile(path string) (*Tokenizer, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	if looksLikeJSON(data) || strings.HasSuffix(path, ".json") {
		t, err := FromJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return t, nil
	}
	opt := TiktokenOptions{}
	cfgPath := filepath.Join(filepath.Dir(path), "tokenizer_config.json")
	if cfg, err := os.ReadFile(cfgPath); err == nil {
		opt.Config = cfg
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	t, err := FromTiktoken(data, opt)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

func looksLikeJSON(data []byte) bool {
	s := strings.TrimLeft(string(data[:min(len(data), 64)]), " \t\r\n\ufeff")
	return strings.HasPrefix(s, "{")
}

// FromGPT2 builds the GPT-2 tokenizer from the original OpenAI files:
// encoder.json (byte-level token → id) and vocab.bpe (a "#version" line,
// then one "a b" merge per line).
func FromGPT2(encoderJSON, vocabBPE []byte) (*Tokenizer, error) {
	var vocab map[string]int
	if err := json.Unmarshal(encoderJSON, &vocab); err != nil {
		return nil, fmt.Errorf("encoder.json: %w", err)
	}
	var merges []string
	for i, line := range strings.Split(string(vocabBPE), "\n") {
		line = strings.TrimRight(line, "\r")
		if line == "" || (i == 0 && strings.HasPrefix(line, "#")) {
			continue
		}
		merges = append(merges, line)
	}
	f := map[string]any{
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
	}
	if id, ok := vocab["<|endoftext|>"]; ok {
		f["added_tokens"] = []AddedToken{{ID: id, Content: "<|endoftext|>", Special: true}}
	}
	data, err := json.Marshal(f)
	if err != nil {
		return nil, fmt.Errorf("gpt2: %w", err)
	}
	t, err := FromJSON(data)
	if err != nil {
		return nil, fmt.Errorf("gpt2 (vocab.bpe): %w", err)
	}
	return t, nil
}
