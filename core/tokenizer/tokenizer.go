// Package tokenizer turns text into token ids and back exactly as the
// reference tokenizers of real models do.
//
// Two on-disk formats are read:
//
//   - Hugging Face tokenizer.json with a BPE model (byte-level as in GPT-2,
//     Qwen, DeepSeek and Llama 3, or character-level with byte fallback),
//     its normalizers, pre-tokenizers, added/special tokens and decoder;
//   - tiktoken BPE-rank files (tiktoken.model: base64 token, space, rank per
//     line) with special tokens from tokenizer_config.json, as Kimi
//     checkpoints ship them.
//
// Load picks the format from a path; FromJSON, FromTiktoken and FromGPT2
// work on bytes so the package runs unchanged in the browser (GOOS=js).
// A Tokenizer is safe for concurrent use.
package tokenizer

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Tokenizer encodes text to token ids and decodes ids to text.
type Tokenizer struct {
	model *bpeModel

	// Added tokens: those matched on the raw text and those matched after
	// normalisation (normalized: true in tokenizer.json).
	rawAdded, normAdded addedSet

	normalize func(string) string // nil: identity
	pre       splitFunc           // nil: a segment is one word

	idBytes   [][]byte // id → decoded bytes; nil marks an unused id
	tokenToID map[string]int

	stripContent string // decoder Strip: remove up to stripStart leading
	stripStart   int    // copies of stripContent from the output
}

// splitFunc cuts a piece of text into smaller pieces.
type splitFunc func(s string, emit func(string))

// Vocab returns the number of token ids: one more than the largest id.
func (t *Tokenizer) Vocab() int { return len(t.idBytes) }

// TokenID returns the id of a token given as written in the vocabulary
// (added and special tokens by their content, e.g. "<|im_end|>"; byte-level
// tokens in their byte-level spelling, e.g. "Ġthe"; tiktoken tokens as their
// raw bytes).
func (t *Tokenizer) TokenID(s string) (int, bool) {
	id, ok := t.tokenToID[s]
	return id, ok
}

// Encode returns the token ids of text. Added and special tokens that occur
// in text (e.g. "<|im_start|>") become their own ids and are never split.
func (t *Tokenizer) Encode(text string) []int { return t.encode(text, true) }

// EncodeOrdinary is Encode with special tokens treated as plain text: their
// characters are tokenised like any other. Added tokens that are not
// special are still matched, as in Hugging Face's split_special_tokens.
func (t *Tokenizer) EncodeOrdinary(text string) []int { return t.encode(text, false) }

func (t *Tokenizer) encode(text string, special bool) []int {
	ids := make([]int, 0, len(text)/3+1)
	word := func(w string) { ids = t.model.encodeWord(w, ids) }
	plain := func(seg string) {
		if t.pre == nil {
			word(seg)
			return
		}
		t.pre(seg, word)
	}
	t.rawAdded.split(text, special, func(seg string, id int) {
		if id >= 0 {
			ids = append(ids, id)
			return
		}
		if t.normalize != nil {
			seg = t.normalize(seg)
		}
		t.normAdded.split(seg, special, func(seg string, id int) {
			if id >= 0 {
				ids = append(ids, id)
				return
			}
			plain(seg)
		})
	})
	return ids
}

// Decode returns the text of ids. Byte-level tokens decode to their exact
// bytes, so Decode(Encode(s)) == s for byte-level tokenizers without a
// normalizer that changes s; the result is not forced to be valid UTF-8
// (ids that split a character decode to the partial bytes). An id outside
// the vocabulary is an error that names it.
func (t *Tokenizer) Decode(ids []int) (string, error) {
	var b strings.Builder
	for i, id := range ids {
		tb, err := t.tokenBytes(id)
		if err != nil {
			return "", fmt.Errorf("decode: ids[%d]: %w", i, err)
		}
		b.Write(tb)
	}
	s := b.String()
	for n := 0; n < t.stripStart && t.stripContent != "" && strings.HasPrefix(s, t.stripContent); n++ {
		s = s[len(t.stripContent):]
	}
	return s, nil
}

func (t *Tokenizer) tokenBytes(id int) ([]byte, error) {
	if id < 0 || id >= len(t.idBytes) {
		return nil, fmt.Errorf("token id %d out of range [0, %d)", id, len(t.idBytes))
	}
	tb := t.idBytes[id]
	if tb == nil {
		return nil, fmt.Errorf("token id %d is not assigned to any token", id)
	}
	return tb, nil
}

// ---- added tokens ----

// AddedToken is an added or special token as tokenizer.json describes it.
type AddedToken struct {
	ID         int    `json:"id"`
	Content    string `json:"content"`
	SingleWord bool   `json:"single_word"`
	LStrip     bool   `json:"lstrip"`
	RStrip     bool   `json:"rstrip"`
	Normalized bool   `json:"normalized"`
	Special    bool   `json:"special"`
}

// addedSet matches added tokens leftmost-longest.
type addedSet struct {
	toks    []AddedToken
	byFirst [256][]int // first byte → indices into toks, longest first
	any     bool
}

func newAddedSet(toks []AddedToken) addedSet {
	s := addedSet{toks: toks}
	for i, a := range toks {
		if a.Content == "" {
			continue
		}
		s.byFirst[a.Content[0]] = append(s.byFirst[a.Content[0]], i)
		s.any = true
	}
	for _, list := range s.byFirst {
		for i := 1; i < len(list); i++ { // insertion sort by length, descending
			for j := i; j > 0 && len(toks[list[j]].Content) > len(toks[list[j-1]].Content); j-- {
				list[j], list[j-1] = list[j-1], list[j]
			}
		}
	}
	return s
}

func isWordChar(r rune) bool { return r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r) }

// split calls fn for each plain segment (id -1) and each added token found
// in text, in order. Special tokens are matched only when special is true.
func (s *addedSet) split(text string, special bool, fn func(seg string, id int)) {
	if !s.any {
		fn(text, -1)
		return
	}
	segStart := 0
	for i := 0; i < len(text); {
		cands := s.byFirst[text[i]]
		matched := false
		for _, k := range cands {
			a := &s.toks[k]
			if a.Special && !special {
				continue
			}
			if !strings.HasPrefix(text[i:], a.Content) {
				continue
			}
			start, end := i, i+len(a.Content)
			if a.SingleWord {
				if r, _ := utf8.DecodeLastRuneInString(text[:start]); start > 0 && isWordChar(r) {
					continue
				}
				if r, _ := utf8.DecodeRuneInString(text[end:]); end < len(text) && isWordChar(r) {
					continue
				}
			}
			if a.LStrip {
				for start > segStart {
					r, w := utf8.DecodeLastRuneInString(text[segStart:start])
					if !unicode.IsSpace(r) {
						break
					}
					start -= w
				}
			}
			if a.RStrip {
				for end < len(text) {
					r, w := utf8.DecodeRuneInString(text[end:])
					if !unicode.IsSpace(r) {
						break
					}
					end += w
				}
			}
			if start > segStart {
				fn(text[segStart:start], -1)
			}
			fn(a.Content, a.ID)
			segStart, i, matched = end, end, true
			break
		}
		if !matched {
			i++
		}
	}
	if segStart < len(text) {
		fn(text[segStart:], -1)
	}
}
