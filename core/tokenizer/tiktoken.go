package tokenizer

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// TiktokenOptions configures FromTiktoken.
type TiktokenOptions struct {
	// Pattern is the pre-tokenisation regex; empty means PatternKimi.
	Pattern string
	// Config is the contents of tokenizer_config.json (may be nil). Its
	// added_tokens_decoder supplies the special tokens.
	Config []byte
	// ReservedSpecial is the number of special-token ids after the base
	// vocabulary; ids not named in Config get "<|reserved_token_ID|>".
	// Zero means 256 when Config is given (as in Kimi's tokenizer), else 0.
	ReservedSpecial int
}

// FromTiktoken builds a Tokenizer from a tiktoken BPE-rank file
// ("<base64 token> <rank>" per line; rank = token id) such as Kimi's
// tiktoken.model. Lines must be well formed; the error names the line.
//
// Kimi's Python wrapper also cuts inputs into chunks of 400,000 characters
// and runs of more than 25,000 whitespace or non-whitespace characters
// before its regex; that only matters for such degenerate inputs and is not
// reproduced.
func FromTiktoken(model []byte, opt TiktokenOptions) (*Tokenizer, error) {
	ranks := map[string]int32{}
	var maxRank int
	sc := bufio.NewScanner(bytes.NewReader(model))
	sc.Buffer(make([]byte, 1<<16), 1<<20)
	line := 0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(sc.Text())
		if text == "" {
			continue
		}
		b64, rankStr, ok := strings.Cut(text, " ")
		if !ok {
			return nil, fmt.Errorf("tiktoken line %d: want \"<base64 token> <rank>\", got %q", line, clip(text))
		}
		tok, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("tiktoken line %d: token %q is not base64: %v", line, clip(b64), err)
		}
		rank, err := strconv.Atoi(strings.TrimSpace(rankStr))
		if err != nil || rank < 0 || rank > maxTokenID {
			return nil, fmt.Errorf("tiktoken line %d: rank %q is not an integer in [0, %d]", line, clip(rankStr), maxTokenID)
		}
		if prev, dup := ranks[string(tok)]; dup {
			return nil, fmt.Errorf("tiktoken line %d: token %q already has rank %d", line, tok, prev)
		}
		ranks[string(tok)] = int32(rank)
		maxRank = max(maxRank, rank)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("tiktoken line %d: %w", line+1, err)
	}
	if len(ranks) == 0 {
		return nil, fmt.Errorf("tiktoken: no tokens")
	}
	base := maxRank + 1

	specials, err := tiktokenSpecials(opt, base)
	if err != nil {
		return nil, err
	}
	size := base
	for _, a := range specials {
		size = max(size, a.ID+1)
	}
	if err := checkIDSpace("tiktoken", size, len(ranks)+len(specials)); err != nil {
		return nil, err
	}

	bm := &bpeModel{
		byteLevel: true,
		ranks:     ranks,
		tokBytes:  make([][]byte, size),
		unkID:     -1,
		cache:     map[string][]int32{},
	}
	t := &Tokenizer{model: bm, idBytes: make([][]byte, size), tokenToID: make(map[string]int, len(ranks)+len(specials))}
	for tok, r := range ranks {
		if bm.tokBytes[r] != nil {
			return nil, fmt.Errorf("tiktoken: rank %d is used by two tokens", r)
		}
		bm.tokBytes[r] = []byte(tok)
		t.idBytes[r] = []byte(tok)
		t.tokenToID[tok] = int(r)
	}
	for b := 0; b < 256; b++ {
		id, ok := ranks[string([]byte{byte(b)})]
		if !ok {
			return nil, fmt.Errorf("tiktoken: the single byte 0x%02x has no token", b)
		}
		bm.byteID[b] = id
		bm.fallbackID[b] = -1
	}
	for _, a := range specials {
		if a.ID < base && t.idBytes[a.ID] != nil && string(t.idBytes[a.ID]) != a.Content {
			return nil, fmt.Errorf("tokenizer_config.json: special token %q has id %d, which tiktoken.model already uses", a.Content, a.ID)
		}
		t.idBytes[a.ID] = []byte(a.Content)
		t.tokenToID[a.Content] = a.ID
	}
	t.rawAdded = newAddedSet(specials)

	pattern := opt.Pattern
	if pattern == "" {
		pattern = PatternKimi
	}
	m, err := newRegexMatcher(pattern)
	if err != nil {
		return nil, fmt.Errorf("tiktoken: %w", err)
	}
	t.pre = matcherSplit(m, "Isolated", false)
	return t, nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// tiktokenSpecials reads added_tokens_decoder from tokenizer_config.json and
// fills the reserved special range.
func tiktokenSpecials(opt TiktokenOptions, base int) ([]AddedToken, error) {
	if len(opt.Config) == 0 {
		return nil, nil
	}
	var cfg struct {
		AddedTokensDecoder map[string]AddedToken `json:"added_tokens_decoder"`
	}
	if err := json.Unmarshal(opt.Config, &cfg); err != nil {
		return nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	byID := map[int]AddedToken{}
	for k, a := range cfg.AddedTokensDecoder {
		id, err := strconv.Atoi(k)
		if err != nil || id < 0 || id > maxTokenID {
			return nil, fmt.Errorf("tokenizer_config.json: added_tokens_decoder key %q is not a token id in [0, %d]", k, maxTokenID)
		}
		if a.Content == "" {
			return nil, fmt.Errorf("tokenizer_config.json: added_tokens_decoder[%q] has empty content", k)
		}
		a.ID = id
		byID[id] = a
	}
	reserved := opt.ReservedSpecial
	if reserved == 0 {
		reserved = 256
	}
	if reserved < 0 || base+reserved > maxTokenID {
		return nil, fmt.Errorf("tiktoken: ReservedSpecial %d out of range", reserved)
	}
	for id := base; id < base+reserved; id++ {
		if _, ok := byID[id]; !ok {
			byID[id] = AddedToken{ID: id, Content: fmt.Sprintf("<|reserved_token_%d|>", id), Special: true}
		}
	}
	out := make([]AddedToken, 0, len(byID))
	for _, a := range byID {
		out = append(out, a)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}
