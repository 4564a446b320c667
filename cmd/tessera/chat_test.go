package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// byteLevelTokenizer writes a minimal byte-level BPE tokenizer.json: the 256
// byte symbols as ids 0..255 (no merges) plus the Kimi chat markers.
func byteLevelTokenizer(t *testing.T, dir string) {
	// GPT-2's printable mapping of bytes to unicode code points.
	var bs []int
	for b := '!'; b <= '~'; b++ {
		bs = append(bs, int(b))
	}
	for b := 0xA1; b <= 0xAC; b++ {
		bs = append(bs, b)
	}
	for b := 0xAE; b <= 0xFF; b++ {
		bs = append(bs, b)
	}
	sym := map[int]rune{}
	for _, b := range bs {
		sym[b] = rune(b)
	}
	n := 0
	for b := 0; b < 256; b++ {
		if _, ok := sym[b]; !ok {
			sym[b] = rune(256 + n)
			n++
		}
	}
	vocab := map[string]int{}
	for b := 0; b < 256; b++ {
		vocab[string(sym[b])] = b
	}
	var added []map[string]any
	specials := map[string]int{"<|im_end|>": 256, "<|im_user|>": 257, "<|im_assistant|>": 258, "<|im_system|>": 259,
		"<|im_middle|>": 260, "<|media_start|>": 261, "<|media_content|>": 262, "<|media_end|>": 263,
		"<|media_pad|>": 511} // k3-nano-vision's media_placeholder_token_id
	for id := 264; id < 511; id++ { // reserved ids fill the gap up to the placeholder
		specials[fmt.Sprintf("<|reserved_%d|>", id)] = id
	}
	for s, id := range specials {
		vocab[s] = id
		added = append(added, map[string]any{"id": id, "content": s, "special": true,
			"single_word": false, "lstrip": false, "rstrip": false, "normalized": false})
	}
	tj := map[string]any{
		"version":        "1.0",
		"added_tokens":   added,
		"normalizer":     nil,
		"pre_tokenizer":  map[string]any{"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
		"post_processor": nil,
		"decoder":        map[string]any{"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": true, "use_regex": true},
		"model":          map[string]any{"type": "BPE", "vocab": vocab, "merges": []string{}, "dropout": nil, "unk_token": nil, "fuse_unk": false, "byte_fallback": false},
	}
	b, err := json.Marshal(tj)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), b, 0o644))
}

func TestChatREPL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	// Without a tokenizer chat refuses clearly.
	chatInput = strings.NewReader("hi\n")
	code, _, errs = tessera(t, "chat", "--model", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "chat needs the model's tokenizer")

	byteLevelTokenizer(t, dir)
	chatInput = strings.NewReader("hello there\nand again\n/image x.png\n/reset\nbye\n/exit\n")
	defer func() { chatInput = os.Stdin }()
	code, out, errs := tessera(t, "chat", "--model", dir, "--max-tokens", "4", "--temperature", "0")
	require.Zero(t, code, errs)
	require.Equal(t, 6, strings.Count(out, "> "), out)
	require.Contains(t, out, "(conversation cleared)")
	require.Contains(t, out, "this model has no vision tower: it cannot take images")

	// run --prompt now goes through the tokenizer: a special token in the
	// prompt is one id.
	code, out, errs = tessera(t, "run", "--model", dir, "--prompt", "<|im_user|>hi", "--max-tokens", "2", "--ids")
	require.Zero(t, code, errs)
	code, tok, errs := tessera(t, "tokenize", "--tokenizer", dir, "--text", "<|im_user|>hi")
	require.Zero(t, code, errs)
	require.Equal(t, "257,104,105\n", tok)
	_ = out
}

// With a vision model, /image attaches an image to the next message; later
// turns feed only their own tokens.
func TestChatImages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano-vision", "--out", dir)
	require.Zero(t, code, errs)
	byteLevelTokenizer(t, dir)
	img := filepath.Join("..", "..", "testdata", "images", "gray.png")
	chatInput = strings.NewReader("/image " + img + "\nwhat is this\n/image nope.png\nand now\n/exit\n")
	defer func() { chatInput = os.Stdin }()
	code, out, errs := tessera(t, "chat", "--model", dir, "--max-tokens", "3", "--temperature", "0")
	require.Zero(t, code, errs)
	require.Contains(t, out, "(image 1 attached to your next message)")
	require.Contains(t, out, "nope.png")
	require.Equal(t, 5, strings.Count(out, "> "), out)
}

// chat --session saves the conversation with its state after every reply
// and resumes it in a new process without prefilling it again; another
// model's session is refused.
func TestChatSession(t *testing.T) {
	session := filepath.Join(t.TempDir(), "c.session")
	chatInput = strings.NewReader("And God said\n/exit\n")
	defer func() { chatInput = os.Stdin }()
	code, out1, errs := tessera(t, "chat", "--model", "../../models/k3-micro", "--session", session, "--max-tokens", "6", "--temperature", "0")
	require.Zero(t, code, errs)
	require.NotContains(t, errs, "resumed")
	chatInput = strings.NewReader("Go on\n/exit\n")
	code, out2, errs := tessera(t, "chat", "--model", "../../models/k3-micro", "--session", session, "--max-tokens", "6", "--temperature", "0")
	require.Zero(t, code, errs)
	require.Contains(t, errs, "resumed 2 messages from "+session) // no system message by default
	require.NotEqual(t, out1, out2)

	dir := filepath.Join(t.TempDir(), "m")
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	byteLevelTokenizer(t, dir)
	chatInput = strings.NewReader("hi\n/exit\n")
	code, _, errs = tessera(t, "chat", "--model", dir, "--session", session)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "does not belong to this model")
}

// With a chat template in tokenizer_config.json, chat renders the
// conversation with it (/prompt shows it), stops at the template's
// eos_token, and reports a template's raise_exception without ending the
// session.
func TestChatTemplate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	byteLevelTokenizer(t, dir)
	tmpl := `{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no booms here') }}{% endif %}` +
		`{{ '<|im_user|>' if m.role == 'user' else '<|im_assistant|>' }}[{{ m.role }}]{{ m.content }}<|im_end|>{% endfor %}` +
		`{% if add_generation_prompt %}<|im_assistant|>[assistant]{% endif %}`
	cfg, err := json.Marshal(map[string]any{"chat_template": tmpl, "eos_token": "<|im_end|>"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644))
	chatInput = strings.NewReader("hello\nboom\n/prompt\nagain\n/exit\n")
	defer func() { chatInput = os.Stdin }()
	code, out, errs := tessera(t, "chat", "--model", dir, "--max-tokens", "3", "--temperature", "0")
	require.Zero(t, code, errs)
	require.Contains(t, errs, "tessera chat (tokenizer_config.json)")
	require.Contains(t, out, "(tokenizer_config.json: chat template: no booms here)")
	require.Contains(t, out, "<|im_user|>[user]hello<|im_end|><|im_assistant|>[assistant]")
	require.Equal(t, 5, strings.Count(out, "> "), out)
}

// A GGUF file's tokenizer.chat_template (here the template of
// tokenizer_config.json that export carries over) renders the chat.
func TestChatGGUFTemplate(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	byteLevelTokenizer(t, dir)
	tmpl := `{% for m in messages %}<|im_user|>{{ m.role | upper }}:{{ m.content }}<|im_end|>{% endfor %}{% if add_generation_prompt %}<|im_assistant|>{% endif %}`
	cfg, err := json.Marshal(map[string]any{"chat_template": tmpl})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644))
	f := filepath.Join(tmp, "m.gguf")
	code, _, errs = tessera(t, "export", "--model", dir, "--out", f, "--type", "f32")
	require.Zero(t, code, errs)
	chatInput = strings.NewReader("hi\n/prompt\n/exit\n")
	defer func() { chatInput = os.Stdin }()
	code, out, errs := tessera(t, "chat", "--model", f, "--max-tokens", "2", "--temperature", "0")
	require.Zero(t, code, errs)
	require.Contains(t, errs, "tessera chat (GGUF tokenizer.chat_template)")
	require.Contains(t, out, "<|im_user|>USER:hi<|im_end|>")
}
