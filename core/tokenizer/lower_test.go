package tokenizer

import (
	"math/rand/v2"
	"strings"
	"testing"

	"golang.org/x/text/cases"
	"golang.org/x/text/language"
)

// TestLowerFullMatchesXText pins lowerFull to x/text's default lowercasing
// (full case mapping with Final_Sigma) on words around capital sigma and
// on random strings over letters, marks and word-break punctuation, and
// to Rust's rule where the two differ (characters both cased and
// case-ignorable next to Σ; Rust skips them as ignorable).
func TestLowerFullMatchesXText(t *testing.T) {
	for s, w := range map[string]string{"A\u0345Σ": "a\u0345ς", " \u0345Σ": " \u0345σ", "AΣ\u0345": "aς\u0345", "AΣ\u0345B": "aσ\u0345b"} {
		if got := lowerFull(s); got != w {
			t.Errorf("lowerFull(%q) = %q, want %q (Rust's str::to_lowercase)", s, got, w)
		}
	}
	want := cases.Lower(language.Und)
	for _, s := range []string{"", "ΟΔΟΣ", "ΟΔΟΣ ΟΔΟΣ.", "Σ", "AΣ", "AΣB", "AΣ'", "A'Σ", "AΣ\u0301", "AΣ.B", "ΣA",
		"İstanbul", "İ", "ǅ", "ΑΣ\u200d", "HELLO World", "ÀÉÎ", "Ⅻ", "ᾼ", "ẞ"} {
		if got, w := lowerFull(s), want.String(s); got != w {
			t.Errorf("lowerFull(%q) = %q, x/text %q", s, got, w)
		}
	}
	alpha := []rune("aAzZΣσςΑΩωİıIiǅǄ '.:·’‘\u0301\u200d\u00ad-_1 ΟΔÉé\u0307ᾼⅫⓐⒶ^`")
	r := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b strings.Builder
		for range r.IntN(8) {
			if c := rune(r.IntN(0x3000)); r.IntN(10) == 0 && !(cased(c) && caseIgnorable(c)) {
				b.WriteRune(c)
			} else {
				b.WriteRune(alpha[r.IntN(len(alpha))])
			}
		}
		s := b.String()
		if got, w := lowerFull(s), want.String(s); got != w {
			t.Fatalf("lowerFull(%q) = %q, x/text %q", s, got, w)
		}
	}
}
