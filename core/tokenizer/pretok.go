package tokenizer

import (
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/dlclark/regexp2"
)

// Pre-tokenisation regexes real models use. Each has a hand-written scanner
// below that returns exactly the regex's matches (checked against regexp2 in
// the tests); any other pattern runs on regexp2.
//
// Speed on 1 MB of English prose, Qwen2 pattern, one core of the 2-vCPU
// Xeon dev machine (BenchmarkPreTokenize, Go 1.26): scanner 68 MB/s,
// regexp2 3.3 MB/s — about 20x. regexp2 alone would cap encoding below the
// 10 MB/s target, so the patterns real models use get scanners and
// regexp2 stays the general fallback (and the reference the scanners are
// tested and fuzzed against).
const (
	// PatternGPT2 is the GPT-2 / ByteLevel(use_regex) split.
	PatternGPT2 = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
	// PatternQwen2 is the Qwen2/Qwen3 split (single digits).
	PatternQwen2 = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternCL100K is the cl100k / Llama 3 split (digits in runs of up to three).
	PatternCL100K = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// PatternKimi is TikTokenTokenizer.pat_str of Moonshot's
	// tokenization_kimi.py (Kimi K2, Kimi Linear, K3): Han runs split off,
	// cased letter runs, digits in threes. It uses class intersection
	// (&&), which regexp2 spells as subtraction; see kimiRegexp2.
	PatternKimi = `[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// kimiRegexp2 is PatternKimi in regexp2 (.NET) syntax: [A&&[^B]] is [A-[B]].
const kimiRegexp2 = `[\p{Han}]+|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}-[\p{Han}]]*[\p{Ll}\p{Lm}\p{Lo}\p{M}-[\p{Han}]]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}-[\p{Han}]]+[\p{Ll}\p{Lm}\p{Lo}\p{M}-[\p{Han}]]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`

// matcher finds the non-overlapping matches of a split pattern, calling fn
// with byte offsets in order.
type matcher interface {
	matches(s string, fn func(start, end int)) error
}

// scanFunc returns the end of the pattern's match starting at i, or -1.
type scanFunc func(s string, i int) int

// scanMatcher runs a scanner; a pattern that can match at every position
// (all of ours) never leaves gaps, but gaps are handled anyway.
type scanMatcher struct{ scan scanFunc }

func (m scanMatcher) matches(s string, fn func(start, end int)) error {
	for i := 0; i < len(s); {
		if e := m.scan(s, i); e > i {
			fn(i, e)
			i = e
			continue
		}
		_, w := utf8.DecodeRuneInString(s[i:])
		i += w
	}
	return nil
}

// regexMatcher runs any other pattern on regexp2 (which works on runes).
type regexMatcher struct {
	re      *regexp2.Regexp
	pattern string
}

func newRegexMatcher(pattern string) (matcher, error) {
	switch pattern {
	case PatternGPT2:
		return scanMatcher{scanGPT2}, nil
	case PatternQwen2:
		return scanMatcher{func(s string, i int) int { return scanQwen(s, i, 1) }}, nil
	case PatternCL100K:
		return scanMatcher{func(s string, i int) int { return scanQwen(s, i, 3) }}, nil
	case PatternKimi:
		return scanMatcher{scanKimi}, nil
	}
	return compileRegexMatcher(pattern)
}

func compileRegexMatcher(pattern string) (*regexMatcher, error) {
	if pattern == PatternKimi {
		pattern = kimiRegexp2
	}
	re, err := regexp2.Compile(pattern, regexp2.Unicode)
	if err != nil {
		return nil, fmt.Errorf("split pattern %q: %w", pattern, err)
	}
	return &regexMatcher{re: re, pattern: pattern}, nil
}

func (m *regexMatcher) matches(s string, fn func(start, end int)) error {
	runes := make([]rune, 0, len(s))
	offs := make([]int, 0, len(s)+1)
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		runes = append(runes, r)
		offs = append(offs, i)
		i += w
	}
	offs = append(offs, len(s))
	mt, err := m.re.FindRunesMatch(runes)
	for err == nil && mt != nil {
		if mt.Length > 0 {
			fn(offs[mt.Index], offs[mt.Index+mt.Length])
		}
		mt, err = m.re.FindNextMatch(mt)
	}
	if err != nil {
		return fmt.Errorf("split pattern %q: %w", m.pattern, err)
	}
	return nil
}

// literalMatcher splits on a literal string (Split with pattern String).
type literalMatcher struct{ lit string }

func (m literalMatcher) matches(s string, fn func(start, end int)) error {
	if m.lit == "" {
		return nil
	}
	for i := 0; i+len(m.lit) <= len(s); {
		if s[i:i+len(m.lit)] == m.lit {
			fn(i, i+len(m.lit))
			i += len(m.lit)
		} else {
			i++
		}
	}
	return nil
}

// digitsMatcher is the Digits pre-tokenizer: runs of digits, or single digits.
type digitsMatcher struct{ individual bool }

func (m digitsMatcher) matches(s string, fn func(start, end int)) error {
	for i := 0; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsDigit(r) {
			i += w
			continue
		}
		j := i + w
		for !m.individual && j < len(s) {
			r2, w2 := utf8.DecodeRuneInString(s[j:])
			if !unicode.IsDigit(r2) {
				break
			}
			j += w2
		}
		fn(i, j)
		i = j
	}
	return nil
}

// ---- character classes ----

func at(s string, i int) (rune, int) {
	if i >= len(s) {
		return -1, 0
	}
	c := s[i]
	if c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// asciiClass: bit 1 letter, 2 number, 4 space.
var asciiClass = func() (t [128]uint8) {
	for c := 0; c < 128; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = 1
		case c >= '0' && c <= '9':
			t[c] = 2
		case c == ' ' || (c >= '\t' && c <= '\r'):
			t[c] = 4
		}
	}
	return
}()

func isL(r rune) bool {
	if r < 0 {
		return false
	}
	if r < 128 {
		return asciiClass[r] == 1
	}
	return unicode.IsLetter(r)
}

func isN(r rune) bool {
	if r < 0 {
		return false
	}
	if r < 128 {
		return asciiClass[r] == 2
	}
	return unicode.IsNumber(r)
}

func isS(r rune) bool {
	if r < 0 {
		return false
	}
	if r < 128 {
		return asciiClass[r] == 4
	}
	return unicode.IsSpace(r)
}

func isNL(r rune) bool { return r == '\r' || r == '\n' }

// isPunct is [^\s\p{L}\p{N}].
func isPunct(r rune) bool { return r >= 0 && !isS(r) && !isL(r) && !isN(r) }

// isPrefix is [^\r\n\p{L}\p{N}].
func isPrefix(r rune) bool { return r >= 0 && !isNL(r) && !isL(r) && !isN(r) }

// contraction matches (?i:'s|'t|'re|'ve|'m|'ll|'d) at i (ASCII case
// folding); contractionCased is the case-sensitive form GPT-2 uses.
func contraction(s string, i int) int { return matchContraction(s, i, true) }

func contractionCased(s string, i int) int { return matchContraction(s, i, false) }

func matchContraction(s string, i int, fold bool) int {
	if i >= len(s) || s[i] != '\'' || i+1 >= len(s) {
		return -1
	}
	lower := func(b byte) byte {
		if fold && b >= 'A' && b <= 'Z' {
			return b + 32
		}
		return b
	}
	switch lower(s[i+1]) {
	case 's', 't', 'm', 'd':
		return i + 2
	case 'r', 'v':
		if i+2 < len(s) && lower(s[i+2]) == 'e' {
			return i + 3
		}
	case 'l':
		if i+2 < len(s) && lower(s[i+2]) == 'l' {
			return i + 3
		}
	}
	return -1
}

// run returns the end of the longest run of runes satisfying f from i.
func run(s string, i int, f func(rune) bool) int {
	for i < len(s) {
		r, w := at(s, i)
		if !f(r) {
			break
		}
		i += w
	}
	return i
}

// scanWhitespace handles the shared tail `\s*[\r\n]+|\s+(?!\S)|\s+` (the
// first alternative only when withNL) for a whitespace rune at i.
func scanWhitespace(s string, i int, withNL bool) int {
	end := i
	lastNL := -1
	for end < len(s) {
		r, w := at(s, end)
		if !isS(r) {
			break
		}
		if isNL(r) {
			lastNL = end + w
		}
		end += w
	}
	if withNL && lastNL > 0 {
		return lastNL
	}
	if end == len(s) {
		return end
	}
	// \s+(?!\S): back off the last whitespace rune if at least two remain.
	_, w := utf8.DecodeLastRuneInString(s[i:end])
	if end-w > i {
		return end - w
	}
	return end
}

// scanPunct matches ` ?[^\s\p{L}\p{N}]+` (+ `[\r\n]*` when withNL) at i.
func scanPunct(s string, i int, withNL bool) int {
	j := i
	if s[j] == ' ' {
		j++
	}
	r, _ := at(s, j)
	if !isPunct(r) {
		return -1
	}
	j = run(s, j, isPunct)
	if withNL {
		j = run(s, j, isNL)
	}
	return j
}

// scanGPT2 implements PatternGPT2.
func scanGPT2(s string, i int) int {
	if e := contractionCased(s, i); e > 0 {
		return e
	}
	r, w := at(s, i)
	j := i
	if r == ' ' {
		j = i + 1
	}
	r2, _ := at(s, j)
	switch {
	case isL(r2):
		return run(s, j, isL)
	case isN(r2):
		return run(s, j, isN)
	}
	if e := scanPunct(s, i, false); e > 0 {
		return e
	}
	if isS(r) {
		return scanWhitespace(s, i, false)
	}
	return i + w
}

// scanQwen implements PatternQwen2 (maxDigits 1) and PatternCL100K (3).
func scanQwen(s string, i int, maxDigits int) int {
	if e := contraction(s, i); e > 0 {
		return e
	}
	r, w := at(s, i)
	if isL(r) {
		return run(s, i+w, isL)
	}
	if isPrefix(r) {
		if r2, w2 := at(s, i+w); isL(r2) {
			return run(s, i+w+w2, isL)
		}
	}
	if isN(r) {
		j := i + w
		for k := 1; k < maxDigits; k++ {
			r2, w2 := at(s, j)
			if !isN(r2) {
				break
			}
			j += w2
		}
		return j
	}
	if e := scanPunct(s, i, true); e > 0 {
		return e
	}
	if isS(r) {
		return scanWhitespace(s, i, true)
	}
	return i + w
}

// Kimi classes: upper U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] minus Han,
// lower L = [\p{Ll}\p{Lm}\p{Lo}\p{M}] minus Han.
func isHan(r rune) bool { return r >= 0x2E80 && unicode.Is(unicode.Han, r) }

func isKimiUpper(r rune) bool {
	if r < 0 {
		return false
	}
	if r < 128 {
		return r >= 'A' && r <= 'Z'
	}
	return (unicode.In(r, unicode.Lu, unicode.Lt, unicode.Lm, unicode.Lo, unicode.M)) && !isHan(r)
}

func isKimiLower(r rune) bool {
	if r < 0 {
		return false
	}
	if r < 128 {
		return r >= 'a' && r <= 'z'
	}
	return (unicode.In(r, unicode.Ll, unicode.Lm, unicode.Lo, unicode.M)) && !isHan(r)
}

// kimiUpperLower matches U*L+ at j (with the regex's backtracking), or -1.
func kimiUpperLower(s string, j int) int {
	u := run(s, j, isKimiUpper)
	if r, _ := at(s, u); isKimiLower(r) {
		return run(s, u, isKimiLower)
	}
	// Back off U* to the last rune in [j,u) that is also in L.
	for p := u; p > j; {
		r, w := utf8.DecodeLastRuneInString(s[j:p])
		if isKimiLower(r) {
			return p
		}
		p -= w
	}
	return -1
}

// kimiUpperPlus matches U+L* at j, or -1.
func kimiUpperPlus(s string, j int) int {
	u := run(s, j, isKimiUpper)
	if u == j {
		return -1
	}
	return run(s, u, isKimiLower)
}

// scanKimi implements PatternKimi.
func scanKimi(s string, i int) int {
	r, w := at(s, i)
	if isHan(r) {
		return run(s, i, isHan)
	}
	withContraction := func(e int) int {
		if c := contraction(s, e); c > 0 {
			return c
		}
		return e
	}
	pre := isPrefix(r)
	if pre {
		if e := kimiUpperLower(s, i+w); e > 0 {
			return withContraction(e)
		}
	}
	if e := kimiUpperLower(s, i); e > 0 {
		return withContraction(e)
	}
	if pre {
		if e := kimiUpperPlus(s, i+w); e > 0 {
			return withContraction(e)
		}
	}
	if e := kimiUpperPlus(s, i); e > 0 {
		return withContraction(e)
	}
	if isN(r) {
		j := i + w
		for k := 1; k < 3; k++ {
			r2, w2 := at(s, j)
			if !isN(r2) {
				break
			}
			j += w2
		}
		return j
	}
	if e := scanPunct(s, i, true); e > 0 {
		return e
	}
	if isS(r) {
		return scanWhitespace(s, i, true)
	}
	return i + w
}
