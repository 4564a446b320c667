package tokenizer

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
)

var updateChat = flag.Bool("update-chat", false, "rewrite testdata/tokenizer/kimi_chat_golden.json with RenderKimi's own output (a regression snapshot, not a reference)")

type chatCase struct {
	Name                string    `json:"name"`
	Messages            []Message `json:"messages"`
	AddGenerationPrompt bool      `json:"add_generation_prompt"`
	Want                string    `json:"want"`
}

// TestRenderKimiGolden is a regression snapshot, not a conformance test:
// testdata/tokenizer/kimi_chat_golden.json is written by RenderKimi itself
// (go test -run TestRenderKimiGolden -update-chat), so it catches any
// change to the rendering but proves nothing about agreeing with Kimi's
// published Jinja chat template. Only TestRenderKimiExact's two strings,
// written out by hand, are independent of RenderKimi's output; nothing in
// this package has been checked against a Jinja rendering of the
// published template yet (goldens rendered by a real Jinja implementation
// are a separate issue). Rewrite the file only for an intended change,
// and check its diff by hand.
func TestRenderKimiGolden(t *testing.T) {
	path := filepath.Join("..", "..", "testdata", "tokenizer", "kimi_chat_golden.json")
	cases := []chatCase{
		{Name: "user only, default system", Messages: []Message{{Role: "user", Content: "Hello"}}, AddGenerationPrompt: true},
		{Name: "explicit system", Messages: []Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "2+2?"}}, AddGenerationPrompt: true},
		{Name: "multi-turn, no generation prompt", Messages: []Message{
			{Role: "system", Content: "S"}, {Role: "user", Content: "hi"}, {Role: "assistant", Content: "hello!"}, {Role: "user", Content: "bye\n"}}},
		{Name: "images", Messages: []Message{{Role: "user", Content: "What is in these?", Images: 2}}, AddGenerationPrompt: true},
		{Name: "tool turn", Messages: []Message{{Role: "user", Content: "weather?"}, {Role: "tool", Content: `{"t":21}`}}, AddGenerationPrompt: true},
		{Name: "empty conversation", Messages: nil, AddGenerationPrompt: true},
		{Name: "unicode content", Messages: []Message{{Role: "user", Content: "你好 👋 <b>"}}},
	}
	if *updateChat {
		for i := range cases {
			cases[i].Want = RenderKimi(cases[i].Messages, cases[i].AddGenerationPrompt)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		enc.SetIndent("", " ")
		if err := enc.Encode(cases); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var golden []chatCase
	if err := json.Unmarshal(data, &golden); err != nil {
		t.Fatal(err)
	}
	if len(golden) == 0 {
		t.Fatal("no golden cases")
	}
	for _, c := range golden {
		t.Run(c.Name, func(t *testing.T) {
			if got := RenderKimi(c.Messages, c.AddGenerationPrompt); got != c.Want {
				t.Errorf("RenderKimi:\n got %q\nwant %q", got, c.Want)
			}
		})
	}
}

// TestRenderKimiExact checks strings written out by hand, independent of
// the golden file (which RenderKimi writes itself).
func TestRenderKimiExact(t *testing.T) {
	tests := []struct {
		name string
		msgs []Message
		gen  bool
		want string
	}{
		{"public K2 example", []Message{{Role: "user", Content: "Hello"}}, true,
			"<|im_system|>system<|im_middle|>You are Kimi, an AI assistant created by Moonshot AI.<|im_end|>" +
				"<|im_user|>user<|im_middle|>Hello<|im_end|><|im_assistant|>assistant<|im_middle|>"},
		{"image", []Message{{Role: "system", Content: "S"}, {Role: "user", Content: "x", Images: 1}}, false,
			"<|im_system|>system<|im_middle|>S<|im_end|><|im_user|>user<|im_middle|>" +
				"<|media_start|>image<|media_content|><|media_pad|><|media_end|>x<|im_end|>"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := RenderKimi(tc.msgs, tc.gen); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
