package tokenizer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"golang.org/x/text/unicode/norm"
)

type hfFile struct {
	AddedTokens  []AddedToken    `json:"added_tokens"`
	Normalizer   json.RawMessage `json:"normalizer"`
	PreTokenizer json.RawMessage `json:"pre_tokenizer"`
	Decoder      json.RawMessage `json:"decoder"`
	Model        *hfModel        `json:"model"`
}

type hfModel struct {
	Type                    string            `json:"type"`
	UnkToken                *string           `json:"unk_token"`
	ContinuingSubwordPrefix *string           `json:"continuing_subword_prefix"`
	EndOfWordSuffix         *string           `json:"end_of_word_suffix"`
	FuseUnk                 bool              `json:"fuse_unk"`
	ByteFallback            bool              `json:"byte_fallback"`
	IgnoreMerges            bool              `json:"ignore_merges"`
	Vocab                   map[string]int    `json:"vocab"`
	Merges                  []json.RawMessage `json:"merges"`
}

// maxTokenID bounds ids read from files (real vocabularies are < 1M).
const maxTokenID = 1<<24 - 1

// checkIDSpace refuses an id space far larger than the tokens that fill it:
// tables are allocated per id, so a few tokens with ids near maxTokenID
// would cost ~1 GB. Real vocabularies are dense, with at most some
// thousands of reserved ids.
func checkIDSpace(file string, size, tokens int) error {
	if size > 2*tokens+1<<16 {
		return fmt.Errorf("%s: largest token id is %d but only %d tokens are defined; refusing a mostly empty id space of %d entries", file, size-1, tokens, size)
	}
	return nil
}

// component is the common shape of normalizers, pre-tokenizers and decoders.
type component struct {
	Type          string            `json:"type"`
	Normalizers   []json.RawMessage `json:"normalizers"`
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
	Decoders      []json.RawMessage `json:"decoders"`
	Pattern       *struct {
		Regex  *string `json:"Regex"`
		String *string `json:"String"`
	} `json:"pattern"`
	Behavior         string  `json:"behavior"`
	Invert           bool    `json:"invert"`
	AddPrefixSpace   bool    `json:"add_prefix_space"`
	UseRegex         *bool   `json:"use_regex"`
	IndividualDigits bool    `json:"individual_digits"`
	Content          *string `json:"content"`
	Prepend          string  `json:"prepend"`
	Start            int     `json:"start"`
	Stop             int     `json:"stop"`
}

func isNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// FromJSON builds a Tokenizer from the contents of a Hugging Face
// tokenizer.json. Only BPE models are supported; an unsupported component
// is an error naming it.
func FromJSON(data []byte) (*Tokenizer, error) {
	var f hfFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("tokenizer.json: %w", err)
	}
	if f.Model == nil {
		return nil, fmt.Errorf("tokenizer.json: no \"model\" section")
	}
	m := f.Model
	if m.Type != "" && m.Type != "BPE" {
		return nil, fmt.Errorf("tokenizer.json: model type %q is not supported (only BPE)", m.Type)
	}
	if m.Vocab == nil {
		return nil, fmt.Errorf("tokenizer.json: model has no vocab")
	}
	if m.ContinuingSubwordPrefix != nil && *m.ContinuingSubwordPrefix != "" {
		return nil, fmt.Errorf("tokenizer.json: continuing_subword_prefix %q is not supported", *m.ContinuingSubwordPrefix)
	}
	if m.EndOfWordSuffix != nil && *m.EndOfWordSuffix != "" {
		return nil, fmt.Errorf("tokenizer.json: end_of_word_suffix %q is not supported", *m.EndOfWordSuffix)
	}

	t := &Tokenizer{}
	var err error
	if t.normalize, err = buildNormalizer(f.Normalizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: normalizer: %w", err)
	}
	byteLevel := false
	if t.pre, byteLevel, err = buildPreTokenizer(f.PreTokenizer); err != nil {
		return nil, fmt.Errorf("tokenizer.json: pre_tokenizer: %w", err)
	}
	dec, err := buildDecoder(f.Decoder, t)
	if err != nil {
		return nil, fmt.Errorf("tokenizer.json: decoder: %w", err)
	}

	size := 0
	for tok, id := range m.Vocab {
		if id < 0 || id > maxTokenID {
			return nil, fmt.Errorf("tokenizer.json: vocab token %q has id %d outside [0, %d]", tok, id, maxTokenID)
		}
		size = max(size, id+1)
	}
	for _, a := range f.AddedTokens {
		if a.ID < 0 || a.ID > maxTokenID {
			return nil, fmt.Errorf("tokenizer.json: added token %q has id %d outside [0, %d]", a.Content, a.ID, maxTokenID)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("tokenizer.json: added token %d has empty content", a.ID)
		}
		size = max(size, a.ID+1)
	}
	if err := checkIDSpace("tokenizer.json", size, len(m.Vocab)+len(f.AddedTokens)); err != nil {
		return nil, err
	}

	bm := &bpeModel{
		byteLevel:    byteLevel,
		tokBytes:     make([][]byte, size),
		ignoreMerges: m.IgnoreMerges,
		wordVocab:    make(map[string]int32, len(m.Vocab)),
		byteFallback: m.ByteFallback,
		unkID:        -1,
		fuseUnk:      m.FuseUnk,
		merges:       make(map[uint64]mergeRule, len(m.Merges)),
		cache:        map[string][]int32{},
	}
	t.model = bm
	t.idBytes = make([][]byte, size)
	t.tokenToID = make(map[string]int, len(m.Vocab)+len(f.AddedTokens))
	for tok, id := range m.Vocab {
		t.tokenToID[tok] = id
		word := []byte(tok)
		if byteLevel {
			if b, ok := byteLevelDecode(tok); ok {
				word = b
			}
		}
		bm.tokBytes[id] = word
		bm.wordVocab[string(word)] = int32(id)
		t.idBytes[id] = dec(tok)
	}
	for b := 0; b < 256; b++ {
		bm.byteID[b], bm.fallbackID[b] = -1, -1
		if id, ok := m.Vocab[string(byteToRune[b])]; ok && byteLevel {
			bm.byteID[b] = int32(id)
		}
		if id, ok := m.Vocab[fmt.Sprintf("<0x%02X>", b)]; ok {
			bm.fallbackID[b] = int32(id)
		}
	}
	if m.UnkToken != nil {
		id, ok := m.Vocab[*m.UnkToken]
		if !ok {
			return nil, fmt.Errorf("tokenizer.json: unk_token %q is not in the vocab", *m.UnkToken)
		}
		bm.unkID = int32(id)
	}
	for i, raw := range m.Merges {
		a, b, err := parseMerge(raw)
		if err != nil {
			return nil, fmt.Errorf("tokenizer.json: merges[%d]: %w", i, err)
		}
		ida, oka := m.Vocab[a]
		idb, okb := m.Vocab[b]
		idm, okm := m.Vocab[a+b]
		switch {
		case !oka:
			return nil, fmt.Errorf("tokenizer.json: merges[%d]: token %q is not in the vocab", i, a)
		case !okb:
			return nil, fmt.Errorf("tokenizer.json: merges[%d]: token %q is not in the vocab", i, b)
		case !okm:
			return nil, fmt.Errorf("tokenizer.json: merges[%d]: merged token %q is not in the vocab", i, a+b)
		}
		bm.merges[pairKey(int32(ida), int32(idb))] = mergeRule{rank: int32(i), id: int32(idm)}
	}

	var raw, normed []AddedToken
	for _, a := range f.AddedTokens {
		t.tokenToID[a.Content] = a.ID
		t.idBytes[a.ID] = dec(a.Content)
		if a.Normalized && t.normalize != nil {
			a.Content = t.normalize(a.Content)
			normed = append(normed, a)
		} else {
			raw = append(raw, a)
		}
	}
	t.rawAdded, t.normAdded = newAddedSet(raw), newAddedSet(normed)
	return t, nil
}

// plainJSONString returns the value of a JSON string literal at the start
// of raw when it has no escapes, and the rest of raw after it.
func plainJSONString(raw []byte) (s string, rest []byte, ok bool) {
	if len(raw) < 2 || raw[0] != '"' {
		return "", nil, false
	}
	for i := 1; i < len(raw); i++ {
		switch raw[i] {
		case '\\':
			return "", nil, false
		case '"':
			return string(raw[1:i]), raw[i+1:], true
		}
	}
	return "", nil, false
}

// parseMerge reads one merge, either "a b" or ["a", "b"].
func parseMerge(raw json.RawMessage) (string, string, error) {
	// Fast paths for the common escape-free spellings (loading speed).
	if v, rest, ok := plainJSONString(raw); ok && len(bytes.TrimSpace(rest)) == 0 {
		if a, b, ok := strings.Cut(v, " "); ok && a != "" && b != "" && !strings.Contains(b, " ") {
			return a, b, nil
		}
	} else if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
		if a, rest, ok := plainJSONString(bytes.TrimSpace(t[1:])); ok {
			if rest = bytes.TrimSpace(rest); len(rest) > 0 && rest[0] == ',' {
				if b, rest, ok := plainJSONString(bytes.TrimSpace(rest[1:])); ok && string(bytes.TrimSpace(rest)) == "]" {
					return a, b, nil
				}
			}
		}
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		a, b, ok := strings.Cut(s, " ")
		if !ok || a == "" || b == "" || strings.Contains(b, " ") {
			return "", "", fmt.Errorf("merge %q is not two tokens separated by one space", s)
		}
		return a, b, nil
	}
	var pair []string
	if err := json.Unmarshal(raw, &pair); err != nil || len(pair) != 2 {
		return "", "", fmt.Errorf("merge %s is neither \"a b\" nor [\"a\", \"b\"]", string(raw))
	}
	return pair[0], pair[1], nil
}

func buildNormalizer(raw json.RawMessage) (func(string) string, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "NFC":
		return norm.NFC.String, nil
	case "NFD":
		return norm.NFD.String, nil
	case "NFKC":
		return norm.NFKC.String, nil
	case "NFKD":
		return norm.NFKD.String, nil
	case "Lowercase":
		return lowerFull, nil
	case "Prepend":
		p := c.Prepend
		return func(s string) string {
			if s == "" {
				return s
			}
			return p + s
		}, nil
	case "Replace":
		if c.Pattern == nil || c.Content == nil {
			return nil, fmt.Errorf("Replace needs pattern and content")
		}
		with := *c.Content
		if c.Pattern.String != nil {
			from := *c.Pattern.String
			return func(s string) string { return strings.ReplaceAll(s, from, with) }, nil
		}
		if c.Pattern.Regex != nil {
			re, err := compileRegexMatcher(*c.Pattern.Regex)
			if err != nil {
				return nil, err
			}
			return func(s string) string {
				var b strings.Builder
				last := 0
				_ = re.matches(s, func(start, end int) {
					b.WriteString(s[last:start])
					b.WriteString(with)
					last = end
				})
				b.WriteString(s[last:])
				return b.String()
			}, nil
		}
		return nil, fmt.Errorf("Replace pattern has neither String nor Regex")
	case "Sequence":
		var fns []func(string) string
		for i, sub := range c.Normalizers {
			fn, err := buildNormalizer(sub)
			if err != nil {
				return nil, fmt.Errorf("normalizers[%d]: %w", i, err)
			}
			if fn != nil {
				fns = append(fns, fn)
			}
		}
		switch len(fns) {
		case 0:
			return nil, nil
		case 1:
			return fns[0], nil
		}
		return func(s string) string {
			for _, fn := range fns {
				s = fn(s)
			}
			return s
		}, nil
	}
	return nil, fmt.Errorf("normalizer type %q is not supported", c.Type)
}

// buildPreTokenizer returns the split function and whether the model is
// byte-level (a ByteLevel pre-tokenizer is present; it must come last).
func buildPreTokenizer(raw json.RawMessage) (splitFunc, bool, error) {
	if isNull(raw) {
		return nil, false, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, false, err
	}
	switch c.Type {
	case "Sequence":
		var fns []splitFunc
		byteLevel := false
		for i, sub := range c.PreTokenizers {
			if byteLevel {
				return nil, false, fmt.Errorf("pretokenizers[%d]: a pre-tokenizer after ByteLevel is not supported", i)
			}
			fn, bl, err := buildPreTokenizer(sub)
			if err != nil {
				return nil, false, fmt.Errorf("pretokenizers[%d]: %w", i, err)
			}
			byteLevel = byteLevel || bl
			if fn != nil {
				fns = append(fns, fn)
			}
		}
		return chainSplits(fns), byteLevel, nil
	case "ByteLevel":
		useRegex := c.UseRegex == nil || *c.UseRegex
		prefix := c.AddPrefixSpace
		var fn splitFunc
		if useRegex {
			fn = matcherSplit(scanMatcher{scanGPT2}, "Isolated", false)
		}
		if prefix {
			inner := fn
			fn = func(s string, emit func(string)) {
				if !strings.HasPrefix(s, " ") {
					s = " " + s
				}
				if inner == nil {
					emit(s)
				} else {
					inner(s, emit)
				}
			}
		}
		return fn, true, nil
	case "Split":
		if c.Pattern == nil {
			return nil, false, fmt.Errorf("Split has no pattern")
		}
		var m matcher
		switch {
		case c.Pattern.Regex != nil:
			var err error
			if m, err = newRegexMatcher(*c.Pattern.Regex); err != nil {
				return nil, false, err
			}
		case c.Pattern.String != nil:
			m = literalMatcher{lit: *c.Pattern.String}
		default:
			return nil, false, fmt.Errorf("Split pattern has neither Regex nor String")
		}
		if !validBehavior(c.Behavior) {
			return nil, false, fmt.Errorf("Split behavior %q is not supported", c.Behavior)
		}
		return matcherSplit(m, c.Behavior, c.Invert), false, nil
	case "Digits":
		return matcherSplit(digitsMatcher{individual: c.IndividualDigits}, "Isolated", false), false, nil
	}
	return nil, false, fmt.Errorf("pre-tokenizer type %q is not supported", c.Type)
}

func validBehavior(b string) bool {
	switch b {
	case "Isolated", "Removed", "MergedWithPrevious", "MergedWithNext":
		return true
	}
	return false
}

func chainSplits(fns []splitFunc) splitFunc {
	switch len(fns) {
	case 0:
		return nil
	case 1:
		return fns[0]
	}
	first, rest := fns[0], chainSplits(fns[1:])
	return func(s string, emit func(string)) {
		first(s, func(p string) { rest(p, emit) })
	}
}

// matcherSplit applies a Split behaviour to a matcher's matches.
func matcherSplit(m matcher, behavior string, invert bool) splitFunc {
	if sm, ok := m.(scanMatcher); ok && behavior == "Isolated" && !invert {
		// Fast path: the scanners cover the text; every match is a piece.
		return func(s string, emit func(string)) {
			_ = sm.matches(s, func(start, end int) { emit(s[start:end]) })
		}
	}
	return func(s string, emit func(string)) {
		type seg struct {
			start, end int
			match      bool
		}
		var segs []seg
		last := 0
		_ = m.matches(s, func(start, end int) {
			if start > last {
				segs = append(segs, seg{last, start, false})
			}
			segs = append(segs, seg{start, end, true})
			last = end
		})
		if last < len(s) {
			segs = append(segs, seg{last, len(s), false})
		}
		pendStart := -1 // MergedWithNext: start of a match waiting for the next piece
		prevEnd := -1   // MergedWithPrevious: a gap piece not yet emitted
		prevStart := 0
		flushPrev := func() {
			if prevEnd >= 0 {
				emit(s[prevStart:prevEnd])
				prevEnd = -1
			}
		}
		for _, sg := range segs {
			isMatch := sg.match != invert
			switch behavior {
			case "Isolated":
				emit(s[sg.start:sg.end])
			case "Removed":
				if !isMatch {
					emit(s[sg.start:sg.end])
				}
			case "MergedWithPrevious":
				if isMatch && prevEnd >= 0 {
					prevEnd = sg.end
					continue
				}
				flushPrev()
				prevStart, prevEnd = sg.start, sg.end
			case "MergedWithNext":
				if isMatch {
					if pendStart < 0 {
						pendStart = sg.start
					}
					continue
				}
				start := sg.start
				if pendStart >= 0 {
					start, pendStart = pendStart, -1
				}
				emit(s[start:sg.end])
			}
		}
		flushPrev()
		if pendStart >= 0 {
			emit(s[pendStart:])
		}
	}
}

// byteToken parses a byte-fallback token "<0xHH>" (two hex digits).
func byteToken(b []byte) (byte, bool) {
	if len(b) != 6 || string(b[:3]) != "<0x" || b[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[3:5]), 16, 8)
	return byte(v), err == nil
}

// buildDecoder returns the per-token decoding (vocabulary spelling → bytes)
// and records a leading Strip on t.
func buildDecoder(raw json.RawMessage, t *Tokenizer) (func(string) []byte, error) {
	steps, err := decoderSteps(raw, t)
	if err != nil {
		return nil, err
	}
	return func(tok string) []byte {
		b := []byte(tok)
		for _, st := range steps {
			b = st(b)
		}
		return b
	}, nil
}

func decoderSteps(raw json.RawMessage, t *Tokenizer) ([]func([]byte) []byte, error) {
	if isNull(raw) {
		return nil, nil
	}
	var c component
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	switch c.Type {
	case "ByteLevel":
		return []func([]byte) []byte{func(b []byte) []byte {
			if out, ok := byteLevelDecode(string(b)); ok {
				return out
			}
			return b
		}}, nil
	case "ByteFallback":
		return []func([]byte) []byte{func(b []byte) []byte {
			if v, ok := byteToken(b); ok {
				return []byte{v}
			}
			return b
		}}, nil
	case "Fuse":
		return nil, nil // joining tokens is what Decode does anyway
	case "Replace":
		if c.Pattern == nil || c.Pattern.String == nil || c.Content == nil {
			return nil, fmt.Errorf("Replace decoder: only a String pattern with content is supported")
		}
		from, to := []byte(*c.Pattern.String), []byte(*c.Content)
		return []func([]byte) []byte{func(b []byte) []byte { return bytes.ReplaceAll(b, from, to) }}, nil
	case "Strip":
		if c.Stop != 0 {
			return nil, fmt.Errorf("Strip decoder with stop %d is not supported", c.Stop)
		}
		if c.Content == nil {
			return nil, fmt.Errorf("Strip decoder has no content")
		}
		t.stripContent, t.stripStart = *c.Content, c.Start
		return nil, nil
	case "Sequence":
		var steps []func([]byte) []byte
		for i, sub := range c.Decoders {
			s, err := decoderSteps(sub, t)
			if err != nil {
				return nil, fmt.Errorf("decoders[%d]: %w", i, err)
			}
			steps = append(steps, s...)
		}
		return steps, nil
	}
	return nil, fmt.Errorf("decoder type %q is not supported", c.Type)
}
