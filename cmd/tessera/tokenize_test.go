package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeTinyTokenizer writes a byte-level tokenizer.json with one merge
// ("h"+"i") and one special token, and returns its directory.
func writeTinyTokenizer(t *testing.T) string {
	t.Helper()
	// The GPT-2 byte alphabet: printable bytes are themselves, the rest
	// move to U+0100 and up.
	vocab := map[string]int{}
	next := 256
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)) {
			r = rune(next)
			next++
		}
		vocab[string(r)] = b
	}
	vocab["hi"] = 256
	f := map[string]any{
		"added_tokens":  []map[string]any{{"id": 257, "content": "<|end|>", "special": true}},
		"pre_tokenizer": map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": true},
		"decoder":       map[string]any{"type": "ByteLevel"},
		"model":         map[string]any{"type": "BPE", "vocab": vocab, "merges": [][2]string{{"h", "i"}}},
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestTokenizeCLI(t *testing.T) {
	dir := writeTinyTokenizer(t)
	file := filepath.Join(t.TempDir(), "in.txt")
	if err := os.WriteFile(file, []byte("hi\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr string
	}{
		{"text", []string{"tokenize", "--tokenizer", dir, "--text", "hi a<|end|>"}, "256,32,97,257\n", ""},
		{"json", []string{"tokenize", "--tokenizer", filepath.Join(dir, "tokenizer.json"), "--text", "hi", "--json"}, "[256]\n", ""},
		{"empty json", []string{"tokenize", "--tokenizer", dir, "--text", "", "--json"}, "[]\n", ""},
		{"empty", []string{"tokenize", "--tokenizer", dir, "--text", ""}, "\n", ""},
		{"file", []string{"tokenize", "--tokenizer", dir, "--file", file}, "256,10\n", ""},
		{"detokenize", []string{"detokenize", "--tokenizer", dir, "--ids", "256,32,97,257"}, "hi a<|end|>\n", ""},
		{"detokenize spaces", []string{"detokenize", "--tokenizer", dir, "--ids", " 256, 10 "}, "hi\n\n", ""},
		{"no tokenizer", []string{"tokenize", "--text", "x"}, "", "--tokenizer is required"},
		{"no text", []string{"tokenize", "--tokenizer", dir}, "", "one of --text or --file"},
		{"both", []string{"tokenize", "--tokenizer", dir, "--text", "x", "--file", file}, "", "not both"},
		{"missing file", []string{"tokenize", "--tokenizer", dir, "--file", file + ".nope"}, "", "--file"},
		{"bad tokenizer path", []string{"tokenize", "--tokenizer", dir + "/nope", "--text", "x"}, "", "no such file"},
		{"bad id", []string{"detokenize", "--tokenizer", dir, "--ids", "1,x"}, "", `item 2 "x"`},
		{"negative id", []string{"detokenize", "--tokenizer", dir, "--ids", "-3"}, "", `item 1 "-3"`},
		{"id out of range", []string{"detokenize", "--tokenizer", dir, "--ids", "5,999"}, "", "token id 999 out of range"},
		{"stray arg", []string{"detokenize", "--tokenizer", dir, "--ids", "1", "extra"}, "", `unexpected argument "extra"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			code := runMain(tc.args, &out, &errOut)
			if tc.wantErr != "" {
				if code != 1 || !strings.Contains(errOut.String(), tc.wantErr) {
					t.Fatalf("exit %d, stderr %q; want exit 1 and %q", code, errOut.String(), tc.wantErr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d, stderr %q", code, errOut.String())
			}
			if out.String() != tc.want {
				t.Fatalf("stdout %q, want %q", out.String(), tc.want)
			}
		})
	}
}

// With the real Qwen3 files (scripts/tokenizer/fetch.sh) the CLI reproduces
// the ids of the reference JS encoder.
func TestTokenizeCLIQwen3(t *testing.T) {
	dir := os.Getenv("TESSERA_TOKENIZER_CACHE")
	if dir == "" {
		dir = filepath.Join("..", "..", "testdata", "tokenizer", "cache")
	}
	dir = filepath.Join(dir, "qwen3")
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s missing; run scripts/tokenizer/fetch.sh", dir)
		}
		t.Skipf("%s missing; run scripts/tokenizer/fetch.sh", dir)
	}
	var out, errOut bytes.Buffer
	if code := runMain([]string{"tokenize", "--tokenizer", dir, "--text", "<|im_start|>user\nhi<|im_end|>"}, &out, &errOut); code != 0 {
		t.Fatalf("exit %d: %s", code, errOut.String())
	}
	if got, want := out.String(), "151644,872,198,6023,151645\n"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
