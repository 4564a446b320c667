package chat

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

// files is a model directory in memory for Load.
func files(m map[string]string) func(string) ([]byte, error) {
	return func(name string) ([]byte, error) {
		if s, ok := m[name]; ok {
			return []byte(s), nil
		}
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
	}
}

const echo = `{{ bos_token }}{% for m in messages %}<{{ m.role }}>{{ m.content }}{{ eos_token }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`

func TestLoad(t *testing.T) {
	hello := []Message{{Role: "user", Content: Text("hi")}}
	for _, tc := range []struct {
		name   string
		files  map[string]string
		tools  []json.RawMessage
		source string
		want   string
		err    string
	}{
		{name: "no files: built-in", files: nil, source: BuiltinSource,
			want: tokenizer.RenderKimi([]tokenizer.Message{{Role: "user", Content: "hi"}}, true)},
		{name: "config without template: built-in", files: map[string]string{"tokenizer_config.json": `{"bos_token": "<s>"}`}, source: BuiltinSource,
			want: tokenizer.RenderKimi([]tokenizer.Message{{Role: "user", Content: "hi"}}, true)},
		{name: "string template, token objects", files: map[string]string{"tokenizer_config.json": `{"chat_template": ` + quote(echo) + `,
			"bos_token": {"content": "<s>", "lstrip": false}, "eos_token": "</s>"}`},
			source: "tokenizer_config.json", want: "<s><user>hi</s><assistant>"},
		{name: "named templates: default", files: map[string]string{"tokenizer_config.json": `{"chat_template": [
			{"name": "default", "template": "D{{ messages[0].content }}"}, {"name": "tool_use", "template": "T{{ tools[0].name }}"}]}`},
			source: "tokenizer_config.json", want: "Dhi"},
		{name: "named templates: tool_use with tools", files: map[string]string{"tokenizer_config.json": `{"chat_template": [
			{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T{{ tools[0].name }}"}]}`},
			tools: []json.RawMessage{json.RawMessage(`{"name": "f"}`)}, source: "tokenizer_config.json", want: "Tf"},
		{name: "chat_template.jinja wins", files: map[string]string{"chat_template.jinja": "J{{ messages|length }}",
			"tokenizer_config.json": `{"chat_template": "C"}`}, source: "chat_template.jinja", want: "J1"},
		{name: "chat_template.json", files: map[string]string{"chat_template.json": `{"chat_template": "P{{ messages[0].role }}"}`},
			source: "chat_template.json", want: "Puser"},
		{name: "syntax error names the file", files: map[string]string{"tokenizer_config.json": `{"chat_template": "{% if %}"}`},
			err: "tokenizer_config.json: template \"default\": chat template does not parse"},
		{name: "bad chat_template type", files: map[string]string{"tokenizer_config.json": `{"chat_template": 3}`},
			err: "want a string or a list"},
		{name: "raise_exception", files: map[string]string{"tokenizer_config.json": `{"chat_template": "{{ raise_exception('Only user turns, please.') }}"}`},
			err: "Only user turns, please."},
		{name: "bad json", files: map[string]string{"tokenizer_config.json": `{`}, err: "tokenizer_config.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Load(files(tc.files))
			if err == nil {
				var got string
				got, err = r.Render(Input{Messages: hello, Tools: tc.tools, AddGenerationPrompt: true})
				if tc.err == "" {
					require.NoError(t, err)
					assert.Equal(t, tc.source, r.Source)
					assert.Equal(t, tc.want, got)
					return
				}
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func TestForModelAndGGUF(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(`{"chat_template": `+quote(echo)+`, "eos_token": "</s>"}`), 0o644))
	r, err := ForModel(dir)
	require.NoError(t, err)
	assert.Equal(t, "</s>", r.Token("eos_token"))
	assert.False(t, r.IsBuiltin())

	r, err = ForModel(t.TempDir())
	require.NoError(t, err)
	assert.True(t, r.IsBuiltin())
	assert.Equal(t, tokenizer.KimiEnd, r.Token("eos_token"))

	kv := map[string]any{
		"tokenizer.chat_template":      echo,
		"tokenizer.ggml.tokens":        []string{"<s>", "</s>", "a"},
		"tokenizer.ggml.bos_token_id":  uint32(0),
		"tokenizer.ggml.eos_token_id":  uint32(1),
		"tokenizer.ggml.add_bos_token": false,
	}
	get := func(k string) (any, bool) { v, ok := kv[k]; return v, ok }
	r, err = FromGGUF(get)
	require.NoError(t, err)
	got, err := r.Render(Input{Messages: []Message{{Role: "user", Content: Text("x")}}})
	require.NoError(t, err)
	assert.Equal(t, "<s><user>x</s>", got)
	assert.Equal(t, "GGUF tokenizer.chat_template", r.Source)

	delete(kv, "tokenizer.chat_template")
	r, err = FromGGUF(get)
	require.NoError(t, err)
	assert.True(t, r.IsBuiltin())
	kv["tokenizer.chat_template"] = 7
	_, err = FromGGUF(get)
	require.ErrorContains(t, err, "want a string")
}

// TestBuiltin: without a template, the conversation renders as
// tokenizer.RenderKimi renders it (text parts joined, images counted ahead
// of the text); tools and tool calls are refused with a clear error.
func TestBuiltin(t *testing.T) {
	r := Builtin()
	msgs := []Message{
		{Role: "system", Content: Text("Be brief.")},
		{Role: "user", Content: Parts(Part{Type: "text", Text: "What is "}, Part{Type: "image_url", ImageURL: &ImageURL{URL: "data:image/png;base64,AA=="}}, Part{Type: "text", Text: "this?"})},
	}
	got, err := r.Render(Input{Messages: msgs, AddGenerationPrompt: true})
	require.NoError(t, err)
	want := tokenizer.RenderKimi([]tokenizer.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "What is this?", Images: 1}}, true)
	assert.Equal(t, want, got)
	assert.Len(t, Images(msgs), 1)

	_, err = r.Render(Input{Messages: msgs, Tools: []json.RawMessage{json.RawMessage(`{}`)}})
	require.ErrorContains(t, err, "does not render tool definitions")
	_, err = r.Render(Input{Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{Type: "function", Function: FunctionCall{Name: "f"}}}}}})
	require.ErrorContains(t, err, "tool calls")
	_, err = r.Render(Input{Messages: []Message{{Content: Text("no role")}}})
	require.ErrorContains(t, err, "message 1 has no role")
}

func TestContentJSON(t *testing.T) {
	for _, tc := range []struct{ in, err string }{
		{in: `"hi"`}, {in: `null`}, {in: `[]`},
		{in: `[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"data:image/png;base64,AA=="}}]`},
		{in: `[{"type":"image"}]`},
		{in: `3`, err: "content must be a string, an array of parts or null"},
		{in: `[{"text":"a"}]`, err: "has no type"},
		{in: `[{"type":"image_url"}]`, err: "needs image_url.url"},
	} {
		var c Content
		err := json.Unmarshal([]byte(tc.in), &c)
		if tc.err != "" {
			require.ErrorContains(t, err, tc.err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		out, err := json.Marshal(c)
		require.NoError(t, err)
		assert.JSONEq(t, tc.in, string(out))
	}
}

// TestKeyOrderAndGuard: objects reach the template with their key order
// (tojson writes tool definitions back as given), and the reserved guard
// character is refused in input.
func TestKeyOrderAndGuard(t *testing.T) {
	tmpl, err := Parse(`{{ tools | tojson }}|{{ messages[0].tool_calls[0].function.arguments | tojson }}`)
	require.NoError(t, err)
	got, err := tmpl.Render(Input{
		Tools: []json.RawMessage{json.RawMessage(`{"z": 1, "a": {"y": 2.5, "b": [true, null, "é<"]}}`)},
		Messages: []Message{{Role: "assistant", ToolCalls: []ToolCall{{Type: "function",
			Function: FunctionCall{Name: "f", Arguments: json.RawMessage(`{"q": "x", "b": 9007199254740993}`)}}}}},
	})
	require.NoError(t, err)
	assert.Equal(t, `[{"z": 1, "a": {"y": 2.5, "b": [true, null, "é<"]}}]|{"q": "x", "b": 9007199254740993}`, got)

	_, err = tmpl.Render(Input{Messages: []Message{{Role: "user", Content: Text("a\uFDD0b")}}})
	require.ErrorContains(t, err, "U+FDD0")
	_, err = Parse("x\uFDD0")
	require.ErrorContains(t, err, "U+FDD0")
	_, err = tmpl.Render(Input{Vars: map[string]any{"messages": 1}})
	require.ErrorContains(t, err, "set from the request")
}

// TestGuardTags: whitespace control trims only the text next to a tag,
// never text beyond another tag (the engine's own trimming would).
func TestGuardTags(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"{% if true %}{{ a }}\n{% endif %}", "A\n"},            // trim_blocks must not reach past {{ a }}
		{"Hello {{ a }}{%- if true %}!{% endif %}", "Hello A!"}, // {%- must not reach back past {{ a }}
		{"{{ a }}  {%- if true %}x{% endif %}", "Ax"},
		{"{% for x in [1, 2] %}{{ x }}\n    {% endfor %}", "1\n2\n"},
		{"{{ '%}' }}{% if true %}\n ok{% endif %}", "%} ok"},
	} {
		tmpl, err := Parse(tc.src)
		require.NoError(t, err, tc.src)
		got, err := tmpl.Render(Input{Vars: map[string]any{"a": "A"}})
		require.NoError(t, err, tc.src)
		assert.Equal(t, tc.want, got, tc.src)
	}
}

func TestStrftime(t *testing.T) {
	tm := time.Date(2026, 3, 7, 15, 4, 5, 0, time.UTC)
	for f, want := range map[string]string{
		"%d %b %Y":            "07 Mar 2026",
		"%-d %B %Y, %A (%a)":  "7 March 2026, Saturday (Sat)",
		"%H:%M:%S %I%p %j %y": "15:04:05 03PM 066 26",
		"%Y-%m-%d %%Q %-m/%e": "2026-03-07 %Q 3/ 7",
	} {
		assert.Equal(t, want, Strftime(tm, f), f)
	}
}
