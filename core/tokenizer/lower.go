package tokenizer

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

// lowerFull lowercases s with Unicode's full default case mapping, as the
// Hugging Face Lowercase normalizer (Rust's str::to_lowercase) does:
// simple mappings (unicode.ToLower), plus the two the simple tables lack:
// U+0130 'İ' → "i̇" (i and a combining dot above), and capital sigma → final
// ς at the end of a word (preceded by a cased letter and not followed by
// one, skipping case-ignorable characters; Unicode §3.13 Final_Sigma),
// else σ. It agrees with golang.org/x/text/cases.Lower(language.Und)
// (tested) without its language tables, which cost the wasm 110 KB gzip.
func lowerFull(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i, r := range s {
		switch r {
		case 'İ':
			b.WriteString("i\u0307")
		case 'Σ':
			if finalSigma(s, i) {
				b.WriteRune('ς')
			} else {
				b.WriteRune('σ')
			}
		default:
			b.WriteRune(unicode.ToLower(r))
		}
	}
	return b.String()
}

// finalSigma reports whether the Σ at byte i of s ends a word, by Rust's
// rule: skipping case-ignorable characters, the previous character is
// cased and the next one is not (or there is none). (x/text differs only
// when a character is both cased and case-ignorable, e.g. U+0345.)
func finalSigma(s string, i int) bool {
	before := false
	for j := i; j > 0; {
		r, n := utf8.DecodeLastRuneInString(s[:j])
		j -= n
		if !caseIgnorable(r) {
			before = cased(r)
			break
		}
	}
	if !before {
		return false
	}
	for j := i + len("Σ"); j < len(s); {
		r, n := utf8.DecodeRuneInString(s[j:])
		j += n
		if !caseIgnorable(r) {
			return !cased(r)
		}
	}
	return true
}

// cased is Unicode's Cased property.
func cased(r rune) bool {
	return unicode.IsUpper(r) || unicode.IsLower(r) || unicode.IsTitle(r) ||
		unicode.Is(unicode.Other_Lowercase, r) || unicode.Is(unicode.Other_Uppercase, r)
}

// caseIgnorable is Unicode's Case_Ignorable property: Mn, Me, Cf, Lm, Sk,
// and the Word_Break MidLetter, MidNumLet and Single_Quote characters.
func caseIgnorable(r rune) bool {
	switch r {
	case '\'', '.', ':', '^', '`', '\u00b7', '\u0387', '\u055f', '\u05f4', '\u2018', '\u2019', '\u2024', '\u2027',
		'\ufe13', '\ufe52', '\ufe55', '\uff07', '\uff0e', '\uff1a':
		return true
	}
	return unicode.In(r, unicode.Mn, unicode.Me, unicode.Cf, unicode.Lm, unicode.Sk)
}
