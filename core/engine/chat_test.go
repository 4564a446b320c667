package engine

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// templatedMicro is k3-micro with a chat template in tokenizer_config.json.
func templatedMicro(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range []string{ConfigFile, TokenizerFile, safetensors.SingleFileName} {
		abs, err := filepath.Abs(filepath.Join(microDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(abs, filepath.Join(dir, f)); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := `{% for m in messages %}{% if m.content == 'boom' %}{{ raise_exception('no booms here') }}{% endif %}` +
		`<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`
	cfg, err := json.Marshal(map[string]any{"chat_template": tmpl, "eos_token": "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// The engine renders chat with the model's template, natively (Open) and
// as the browser loads it (Load): the prompt is the template's rendering,
// and a template's raise_exception is a bad request.
func TestChatTemplate(t *testing.T) {
	dir := templatedMicro(t)
	native, err := Open(dir, OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer native.Close()
	browser, err := Load(safetensors.DirOpener(dir))
	if err != nil {
		t.Fatal(err)
	}
	defer browser.Close()
	msgs := []chat.Message{{Role: "system", Content: chat.Text("Be brief.")}, {Role: "user", Content: chat.Text("And God said")}}
	const want = "<system>Be brief.<|im_end|><user>And God said<|im_end|><assistant>"
	for name, e := range map[string]*Engine{"Open": native, "Load": browser} {
		t.Run(name, func(t *testing.T) {
			if src := e.Chat().Source; src != "tokenizer_config.json" {
				t.Fatalf("template from %q", src)
			}
			got, err := e.Chat().Render(chat.Input{Messages: msgs, AddGenerationPrompt: true})
			if err != nil || got != want {
				t.Fatalf("rendered %q (%v), want %q", got, err, want)
			}
			ids, err := e.Codec().Encode(want)
			if err != nil {
				t.Fatal(err)
			}
			st, err := e.Generate(context.Background(), Options{Chat: &chat.Input{Messages: msgs}, MaxTokens: 2}, func(Piece) bool { return true })
			if err != nil {
				t.Fatal(err)
			}
			if st.PromptTokens != len(ids) {
				t.Errorf("prompt of %d tokens, the template's rendering has %d", st.PromptTokens, len(ids))
			}
			_, err = e.Generate(context.Background(), Options{Chat: &chat.Input{Messages: []chat.Message{{Role: "user", Content: chat.Text("boom")}}}, MaxTokens: 2}, func(Piece) bool { return true })
			if !errors.Is(err, ErrBadRequest) || !strings.Contains(err.Error(), "no booms here") {
				t.Errorf("raise_exception: %v", err)
			}
		})
	}
}
