package tokenizer

import (
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// gpt2Tiktoken converts the cached GPT-2 vocabulary to the tiktoken format
// (GPT-2's ids are its tiktoken ranks, as in OpenAI's r50k_base).
func gpt2Tiktoken(t *testing.T) []byte {
	t.Helper()
	tok := realTokenizer(t, "gpt2")
	type row struct {
		b    []byte
		rank int
	}
	var rows []row
	for id := 0; id < tok.Vocab(); id++ {
		if id == 50256 { // <|endoftext|> is a special token, not a rank
			continue
		}
		rows = append(rows, row{tok.model.tokBytes[id], id})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].rank < rows[j].rank })
	var b strings.Builder
	for _, r := range rows {
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString(r.b), r.rank)
	}
	return []byte(b.String())
}

func TestTiktokenMatchesGPT2Golden(t *testing.T) {
	model := gpt2Tiktoken(t)
	cfg := []byte(`{"added_tokens_decoder": {"50256": {"content": "<|endoftext|>", "special": true}}}`)
	tok, err := FromTiktoken(model, TiktokenOptions{Pattern: PatternGPT2, Config: cfg, ReservedSpecial: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i, c := range readGolden(t, "gpt2_golden.json") {
		if got := tok.EncodeOrdinary(c.Text); !equalIDs(got, c.IDs) {
			t.Errorf("case %d %q:\n got %v\nwant %v", i, c.Text, got, c.IDs)
		}
		if text, err := tok.Decode(c.IDs); err != nil || text != c.Text {
			t.Errorf("case %d: Decode = %q, %v", i, text, err)
		}
	}
	if got := tok.Encode("a<|endoftext|>"); !equalIDs(got, []int{64, 50256}) {
		t.Errorf("special: %v", got)
	}

	// Load picks the format from the file and reads tokenizer_config.json
	// from the same directory.
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tiktoken.model"), model, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	// Default pattern is Kimi's, default reserved range 256.
	if loaded.Vocab() != 50256+256 {
		t.Errorf("Vocab = %d, want %d", loaded.Vocab(), 50256+256)
	}
	if id, ok := loaded.TokenID("<|reserved_token_50300|>"); !ok || id != 50300 {
		t.Errorf("reserved token: %d %v", id, ok)
	}
}

// Kimi-style config: named specials plus reserved fill, on a tiny vocabulary.
func TestTiktokenKimiSpecials(t *testing.T) {
	var b strings.Builder
	for i := 0; i < 256; i++ {
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte{byte(i)}), i)
	}
	for i, tok := range []string{"he", "ll", "hell", "o ", "中文"} {
		fmt.Fprintf(&b, "%s %d\n", base64.StdEncoding.EncodeToString([]byte(tok)), 256+i)
	}
	cfg := `{"added_tokens_decoder": {
		"261": {"content": "[BOS]", "special": true},
		"262": {"content": "<|im_end|>", "special": true},
		"263": {"content": "<|im_user|>", "special": true},
		"264": {"content": "<|im_middle|>", "special": true}}}`
	tok, err := FromTiktoken([]byte(b.String()), TiktokenOptions{Config: []byte(cfg)})
	if err != nil {
		t.Fatal(err)
	}
	if tok.Vocab() != 261+256 {
		t.Fatalf("Vocab = %d", tok.Vocab())
	}
	got := tok.Encode("<|im_user|>user<|im_middle|>hello 中文<|im_end|>")
	ids := func(s string) []int {
		out := []int{}
		for _, c := range []byte(s) {
			out = append(out, int(c))
		}
		return out
	}
	want := append([]int{263}, ids("user")...)
	// "hell" "o" " ", then 中文 stays bytes: tiktoken only merges pairs whose
	// concatenation is a token, and no 2..5-byte prefix of 中文 is one.
	want = append(want, 264, 258, 'o', ' ')
	want = append(want, ids("中文")...)
	want = append(want, 262)
	if !equalIDs(got, want) {
		t.Fatalf("Encode = %v, want %v", got, want)
	}
	text, err := tok.Decode(got)
	if err != nil || text != "<|im_user|>user<|im_middle|>hello 中文<|im_end|>" {
		t.Fatalf("Decode = %q %v", text, err)
	}
	if id, ok := tok.TokenID("<|reserved_token_270|>"); !ok || id != 270 {
		t.Fatalf("reserved: %d %v", id, ok)
	}
}

func TestTiktokenErrors(t *testing.T) {
	one := base64.StdEncoding.EncodeToString([]byte("a"))
	tests := []struct {
		name, model, cfg, want string
	}{
		{"empty", "", "", "no tokens"},
		{"no space", one + "\n", "", "line 1"},
		{"bad base64", "@@@ 0\n", "", "line 1: token \"@@@\" is not base64"},
		{"bad rank", one + " x\n", "", "line 1: rank \"x\""},
		{"huge rank", one + " 99999999999\n", "", "line 1: rank"},
		{"dup", one + " 0\n" + one + " 1\n", "", "line 2: token \"a\" already has rank 0"},
		{"missing byte", one + " 0\n", "", "single byte 0x00 has no token"},
		{"bad config", one + " 0\n", "{", "tokenizer_config.json"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cfg []byte
			if tc.cfg != "" {
				cfg = []byte(tc.cfg)
			}
			_, err := FromTiktoken([]byte(tc.model), TiktokenOptions{Config: cfg})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
