package tokenizer

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// toyJSON builds a small byte-level tokenizer.json: the 256 byte symbols,
// a few merges, and some added tokens.
func toyJSON(t testing.TB, mutate func(map[string]any)) []byte {
	t.Helper()
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(byteToRune[b])] = b
	}
	merges := [][2]string{{"Ġ", "t"}, {"h", "e"}, {"Ġt", "he"}, {"i", "n"}, {"in", "g"}, {"Ġ", "Ġ"}, {"ĠĠ", "ĠĠ"}, {"a", "a"}}
	for _, m := range merges {
		if _, ok := vocab[m[0]+m[1]]; !ok {
			vocab[m[0]+m[1]] = len(vocab)
		}
	}
	f := map[string]any{
		"added_tokens": []AddedToken{
			{ID: 300, Content: "<|end|>", Special: true},
			{ID: 301, Content: "<|endoftext|>", Special: true},
			{ID: 302, Content: "<tool>", LStrip: true, RStrip: true},
			{ID: 303, Content: "cat", SingleWord: true},
		},
		"normalizer": nil,
		"pre_tokenizer": map[string]any{"type": "Sequence", "pretokenizers": []any{
			map[string]any{"type": "Split", "pattern": map[string]any{"Regex": PatternQwen2}, "behavior": "Isolated", "invert": false},
			map[string]any{"type": "ByteLevel", "add_prefix_space": false, "use_regex": false},
		}},
		"decoder": map[string]any{"type": "ByteLevel"},
		"model":   map[string]any{"type": "BPE", "vocab": vocab, "merges": merges},
	}
	if mutate != nil {
		mutate(f)
	}
	data, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func toy(t testing.TB) *Tokenizer {
	t.Helper()
	tok, err := FromJSON(toyJSON(t, nil))
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestToyEncode(t *testing.T) {
	tok := toy(t)
	id := func(s string) int {
		i, ok := tok.TokenID(s)
		if !ok {
			t.Fatalf("no token %q", s)
		}
		return i
	}
	tests := []struct {
		name, text string
		want       []int
		ordinary   bool
	}{
		{"merges", "the thing", []int{'t', id("he"), id("Ġt"), 'h', id("ing")}, false},
		{"special", "a<|end|>b", []int{'a', 300, 'b'}, false},
		{"longest special", "<|endoftext|>", []int{301}, false},
		{"ordinary", "<|end|>", []int{'<', '|', 'e', 'n', 'd', '|', '>'}, true},
		{"lstrip rstrip", "x  <tool>  y", []int{'x', 302, 'y'}, false},
		{"non-special added in ordinary", "x <tool> y", []int{'x', 302, 'y'}, true},
		{"single word", "cat concat cats cat", []int{303, id("Ġ") - 0, 'c', 'o', 'n', 'c', 'a', 't', id("Ġ"), 'c', 'a', 't', 's', id("Ġ"), 303}, false},
		{"empty", "", []int{}, false},
		{"long run uses heap", strings.Repeat("a", 101), append(repeat(id("aa"), 50), 'a'), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []int
			if tc.ordinary {
				got = tok.EncodeOrdinary(tc.text)
			} else {
				got = tok.Encode(tc.text)
			}
			if !equalIDs(got, tc.want) {
				t.Errorf("Encode(%q) = %v, want %v", tc.text, got, tc.want)
			}
		})
	}
}

func repeat(id, n int) []int {
	out := make([]int, n)
	for i := range out {
		out[i] = id
	}
	return out
}

// The heap merge and the quadratic merge agree on every word.
func TestMergeHeapMatchesQuadratic(t *testing.T) {
	tok := toy(t)
	for _, s := range append(corpusTexts(t), strings.Repeat("ing the ", 20), strings.Repeat(" ", 200)) {
		syms := tok.model.initialSymbols(s)
		a := tok.model.mergeHeap(append([]int32(nil), syms...))
		var b []int32
		func() { // force the quadratic path
			b = append([]int32(nil), syms...)
			var scratch []byte
			for len(b) > 1 {
				best, bestRank, bestID := -1, int32(1<<30), int32(0)
				for i := 0; i+1 < len(b); i++ {
					if r, id, ok := tok.model.pair(b[i], b[i+1], &scratch); ok && r < bestRank {
						best, bestRank, bestID = i, r, id
					}
				}
				if best < 0 {
					break
				}
				b[best] = bestID
				b = append(b[:best+1], b[best+2:]...)
			}
		}()
		if len(a) != len(b) {
			t.Fatalf("%q: heap %v quadratic %v", s, a, b)
		}
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%q: heap %v quadratic %v", s, a, b)
			}
		}
	}
}

func TestDecodeErrors(t *testing.T) {
	tok := toy(t)
	tests := []struct {
		name string
		ids  []int
		want string
	}{
		{"negative", []int{1, -5}, "ids[1]: token id -5 out of range"},
		{"too big", []int{99999}, "token id 99999 out of range [0, 304)"},
		{"hole", []int{299}, "token id 299 is not assigned"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tok.Decode(tc.ids)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Decode(%v) error = %v, want it to contain %q", tc.ids, err, tc.want)
			}
			if _, err := tok.NewStream().Add(tc.ids[len(tc.ids)-1]); err == nil {
				t.Fatalf("Stream.Add(%d) gave no error", tc.ids[len(tc.ids)-1])
			}
		})
	}
}

func TestFromJSONErrors(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(map[string]any)
		raw    string
		want   string
	}{
		{"not json", nil, "{", "tokenizer.json"},
		{"no model", nil, `{"added_tokens":[]}`, `no "model"`},
		{"wordpiece", func(f map[string]any) { f["model"].(map[string]any)["type"] = "WordPiece" }, "", `model type "WordPiece"`},
		{"bad merge string", func(f map[string]any) { f["model"].(map[string]any)["merges"] = []string{"abc"} }, "", `merges[0]: merge "abc"`},
		{"merge not in vocab", func(f map[string]any) { f["model"].(map[string]any)["merges"] = []string{"Ġ zz"} }, "", `token "zz" is not in the vocab`},
		{"merged not in vocab", func(f map[string]any) { f["model"].(map[string]any)["merges"] = []string{"x y"} }, "", `merged token "xy"`},
		{"unknown normalizer", func(f map[string]any) { f["normalizer"] = map[string]any{"type": "BertNormalizer"} }, "", `normalizer type "BertNormalizer"`},
		{"unknown pretok", func(f map[string]any) { f["pre_tokenizer"] = map[string]any{"type": "Metaspace"} }, "", `pre-tokenizer type "Metaspace"`},
		{"bad regex", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"Regex": "(["}, "behavior": "Isolated"}
		}, "", `split pattern "(["`},
		{"bad behavior", func(f map[string]any) {
			f["pre_tokenizer"] = map[string]any{"type": "Split", "pattern": map[string]any{"String": " "}, "behavior": "Sideways"}
		}, "", `behavior "Sideways"`},
		{"unknown decoder", func(f map[string]any) { f["decoder"] = map[string]any{"type": "WordPiece"} }, "", `decoder type "WordPiece"`},
		{"bad unk", func(f map[string]any) { f["model"].(map[string]any)["unk_token"] = "<unk>" }, "", `unk_token "<unk>"`},
		{"empty added", func(f map[string]any) { f["added_tokens"] = []AddedToken{{ID: 5}} }, "", "added token 5 has empty content"},
		{"huge id", func(f map[string]any) { f["added_tokens"] = []AddedToken{{ID: 1 << 40, Content: "x"}} }, "", "outside [0,"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.raw)
			if tc.raw == "" {
				data = toyJSON(t, tc.mutate)
			}
			_, err := FromJSON(data)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// A character-level BPE with byte fallback (Llama 2 / SentencePiece style).
func fallbackToy(t testing.TB) *Tokenizer {
	t.Helper()
	vocab := map[string]int{"<unk>": 0, "▁": 1, "h": 2, "i": 3, "hi": 4, "▁hi": 5}
	for b := 0; b < 256; b++ {
		vocab["<0x"+hex2(b)+">"] = 10 + b
	}
	f := map[string]any{
		"normalizer": map[string]any{"type": "Sequence", "normalizers": []any{
			map[string]any{"type": "Prepend", "prepend": "▁"},
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": " "}, "content": "▁"},
		}},
		"decoder": map[string]any{"type": "Sequence", "decoders": []any{
			map[string]any{"type": "Replace", "pattern": map[string]any{"String": "▁"}, "content": " "},
			map[string]any{"type": "ByteFallback"},
			map[string]any{"type": "Fuse"},
			map[string]any{"type": "Strip", "content": " ", "start": 1, "stop": 0},
		}},
		"model": map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{"h i", "▁ hi"}, "byte_fallback": true, "unk_token": "<unk>", "fuse_unk": true},
	}
	data, _ := json.Marshal(f)
	tok, err := FromJSON(data)
	if err != nil {
		t.Fatal(err)
	}
	return tok
}

func TestByteFallback(t *testing.T) {
	tok := fallbackToy(t)
	ids := tok.Encode("hi hé")
	// "▁hi▁hé": ▁hi, ▁, h, é → <0xC3> <0xA9>
	want := []int{5, 1, 2, 10 + 0xC3, 10 + 0xA9}
	if !equalIDs(ids, want) {
		t.Fatalf("Encode = %v, want %v", ids, want)
	}
	// Invalid bytes fall back to byte tokens too, even at the end.
	if got := tok.Encode("h\xff"); !equalIDs(got, []int{1, 2, 10 + 0xFF}) {
		t.Fatalf("Encode(invalid) = %v", got)
	}
	text, err := tok.Decode(ids)
	if err != nil || text != "hi hé" {
		t.Fatalf("Decode = %q, %v; want %q", text, err, "hi hé")
	}
	checkStream(t, tok, ids)
}

func hex2(b int) string {
	const digits = "0123456789ABCDEF"
	return string([]byte{digits[b>>4], digits[b&15]})
}

// checkStream feeds ids one at a time and checks the stream's pieces.
func checkStream(t testing.TB, tok *Tokenizer, ids []int) {
	t.Helper()
	want, err := tok.Decode(ids)
	if err != nil {
		t.Fatal(err)
	}
	st := tok.NewStream()
	var got strings.Builder
	cuts := map[int]bool{}
	for _, id := range ids {
		piece, err := st.Add(id)
		if err != nil {
			t.Fatal(err)
		}
		got.WriteString(piece)
		cuts[got.Len()] = true
	}
	got.WriteString(st.Flush())
	out := got.String()
	if out != want {
		t.Fatalf("stream = %q, Decode = %q", out, want)
	}
	// No piece boundary falls inside a valid multi-byte character.
	for i := 0; i < len(out); {
		r, w := utf8.DecodeRuneInString(out[i:])
		if r != utf8.RuneError || w > 1 {
			for k := i + 1; k < i+w; k++ {
				if cuts[k] {
					t.Fatalf("stream cut %q in two (output %q)", out[i:i+w], out)
				}
			}
		}
		i += w
	}
}

func TestStreamMatchesDecode(t *testing.T) {
	tok := toy(t)
	for _, s := range corpusTexts(t) {
		checkStream(t, tok, tok.Encode(s))
	}
	// Byte-by-byte ids of multi-byte characters: held back until complete.
	st := tok.NewStream()
	var out []string
	for _, b := range []byte("é€😀") {
		p, err := st.Add(int(b))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	want := []string{"", "é", "", "", "€", "", "", "", "😀"}
	if strings.Join(out, "|") != strings.Join(want, "|") {
		t.Fatalf("pieces %q, want %q", out, want)
	}
	if rest := st.Flush(); rest != "" {
		t.Fatalf("Flush = %q", rest)
	}
	// An incomplete character at the end comes out of Flush.
	st.Add(0xE2)
	if p, _ := st.Add(0x82); p != "" {
		t.Fatalf("partial emitted %q", p)
	}
	if rest := st.Flush(); rest != "\xe2\x82" {
		t.Fatalf("Flush = %q", rest)
	}
}

func TestStreamRealTokenizers(t *testing.T) {
	for _, name := range []string{"qwen3", "deepseek_v3", "gpt2"} {
		t.Run(name, func(t *testing.T) {
			tok := realTokenizer(t, name)
			for _, s := range corpusTexts(t) {
				checkStream(t, tok, tok.Encode(s))
			}
		})
	}
}

// FuzzRoundTrip: for arbitrary bytes, Decode(Encode(s)) == s (byte-level,
// no normalizer), EncodeOrdinary too, and streaming equals one-shot.
func FuzzRoundTrip(f *testing.F) {
	for _, s := range corpusTexts(f) {
		f.Add(s)
	}
	f.Add("\x00\x01\xff\xfe<|end|><|end|")
	f.Add("x  <tool>  cat\r\n\t")
	tok := toy(f)
	fb := fallbackToy(f)
	f.Fuzz(func(t *testing.T, s string) {
		if !strings.Contains(s, "▁") { // "▁" decodes to a space by design
			ids := fb.Encode(s)
			if got, err := fb.Decode(ids); err != nil || got != s {
				t.Fatalf("byte fallback: Decode(Encode(%q)) = %q, %v", s, got, err)
			}
			checkStream(t, fb, ids)
		}
		for _, ids := range [][]int{tok.Encode(s), tok.EncodeOrdinary(s)} {
			got, err := tok.Decode(ids)
			if err != nil {
				t.Fatal(err)
			}
			// lstrip/rstrip of <tool> deliberately drops whitespace.
			if !strings.Contains(s, "<tool>") && got != s {
				t.Fatalf("Decode(Encode(%q)) = %q", s, got)
			}
			checkStream(t, tok, ids)
		}
	})
}

func TestParseMerge(t *testing.T) {
	tests := []struct {
		raw, a, b, err string
	}{
		{`"Ġ t"`, "Ġ", "t", ""},
		{`["Ġ","t"]`, "Ġ", "t", ""},
		{` [ "a b" , "c" ] `, "a b", "c", ""},
		{`["\u0120", "\"x"]`, "Ġ", `"x`, ""},
		{`"a\u0020b"`, "a", "b", ""},
		{`"ab"`, "", "", "not two tokens"},
		{`"a b c"`, "", "", "not two tokens"},
		{`["a"]`, "", "", "neither"},
		{`42`, "", "", "neither"},
	}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			a, b, err := parseMerge([]byte(tc.raw))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil || a != tc.a || b != tc.b {
				t.Fatalf("got %q %q %v, want %q %q", a, b, err, tc.a, tc.b)
			}
		})
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := toy(t)
	texts := corpusTexts(t)
	want := make([][]int, len(texts))
	for i, s := range texts {
		want[i] = tok.Encode(s)
	}
	done := make(chan bool)
	for g := 0; g < 4; g++ {
		go func() {
			defer func() { done <- true }()
			for i, s := range texts {
				if got := tok.Encode(s); !equalIDs(got, want[i]) {
					t.Errorf("concurrent Encode(%q) differs", s)
				}
			}
		}()
	}
	for g := 0; g < 4; g++ {
		<-done
	}
}

// FuzzLoaders: malformed tokenizer.json / tiktoken input gives an error,
// never a panic, and whatever loads can encode and decode.
func FuzzLoaders(f *testing.F) {
	f.Add(toyJSON(f, nil))
	f.Add([]byte(`{"model":{"vocab":{"a":0,"b":1,"ab":2},"merges":[["a","b"]]},"added_tokens":[{"id":3,"content":"<s>","lstrip":true}]}`))
	f.Add([]byte("YQ== 0\nYg== 1\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, load := range []func([]byte) (*Tokenizer, error){
			FromJSON,
			func(b []byte) (*Tokenizer, error) { return FromTiktoken(b, TiktokenOptions{}) },
		} {
			tok, err := load(data)
			if err != nil {
				continue
			}
			ids := tok.Encode("ab <s> xyz 12")
			if _, err := tok.Decode(ids); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// byteToken parses exactly "<0xHH>" (either case), nothing else.
func TestByteToken(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want byte
		ok   bool
	}{
		{"<0x41>", 0x41, true}, {"<0xff>", 0xff, true}, {"<0x0A>", 0x0a, true},
		{"<0x4>", 0, false}, {"<0x411>", 0, false}, {"<0xZZ>", 0, false}, {"0x41>", 0, false}, {"<0X41>", 0, false}, {"<0x+1>", 0, false},
	} {
		got, ok := byteToken([]byte(tc.in))
		if ok != tc.ok || got != tc.want {
			t.Errorf("byteToken(%q) = %#x, %v; want %#x, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}
