package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"sync"
	"testing"
)

// cacheDir is where scripts/tokenizer/fetch.sh puts the real tokenizer
// files; TESSERA_TOKENIZER_CACHE overrides it.
func cacheDir() string {
	if d := os.Getenv("TESSERA_TOKENIZER_CACHE"); d != "" {
		return d
	}
	return filepath.Join("..", "..", "testdata", "tokenizer", "cache")
}

var (
	loadMu sync.Mutex
	loaded = map[string]*Tokenizer{}
)

// realTokenizer loads one cached real tokenizer (qwen3, deepseek_v3, gpt2).
// Without the cache the test is skipped, except under CI=true where the
// missing files are a failure.
func realTokenizer(tb testing.TB, name string) *Tokenizer {
	tb.Helper()
	loadMu.Lock()
	defer loadMu.Unlock()
	if t, ok := loaded[name]; ok {
		return t
	}
	dir := filepath.Join(cacheDir(), name)
	if _, err := os.Stat(dir); err != nil {
		msg := "tokenizer cache " + dir + " missing; run scripts/tokenizer/fetch.sh"
		if os.Getenv("CI") == "true" {
			tb.Fatal(msg)
		}
		tb.Skip(msg)
	}
	t, err := Load(dir)
	if err != nil {
		tb.Fatalf("Load(%s): %v", dir, err)
	}
	loaded[name] = t
	return t
}

type goldenCase struct {
	Text string `json:"text"`
	IDs  []int  `json:"ids"`
}

func readGolden(t *testing.T, name string) []goldenCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "tokenizer", name))
	if err != nil {
		t.Fatal(err)
	}
	var cases []goldenCase
	if err := json.Unmarshal(data, &cases); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return cases
}

func TestGoldenIDs(t *testing.T) {
	tests := []struct {
		name, golden string
		ordinary     bool // the reference encoder has no special tokens
		roundTrip    bool // no normalizer, so Decode(Encode(s)) == s
	}{
		{"qwen3", "qwen3_golden.json", false, false},
		{"deepseek_v3", "deepseek_v3_golden.json", false, true},
		{"gpt2", "gpt2_golden.json", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tok := realTokenizer(t, tc.name)
			for i, c := range readGolden(t, tc.golden) {
				var got []int
				if tc.ordinary {
					got = tok.EncodeOrdinary(c.Text)
				} else {
					got = tok.Encode(c.Text)
				}
				if !equalIDs(got, c.IDs) {
					t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
					continue
				}
				text, err := tok.Decode(got)
				if err != nil {
					t.Errorf("case %d: Decode: %v", i, err)
				} else if tc.roundTrip && text != c.Text {
					t.Errorf("case %d: Decode = %q, want %q", i, text, c.Text)
				}
			}
		})
	}
}

func equalIDs(a, b []int) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
