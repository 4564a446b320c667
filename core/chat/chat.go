// Package chat turns a conversation into the prompt text a model was
// trained on. A model that ships a chat template (tokenizer_config.json's
// "chat_template", a chat_template.jinja file, or a GGUF's
// tokenizer.chat_template) is rendered by that Jinja template as Hugging
// Face transformers renders it (see Template); a model without one gets
// tessera's built-in Kimi format (tokenizer.RenderKimi). Renderer is the
// one entry point that picks:
//
//	r, err := chat.ForModel(dir) // or chat.Load, chat.FromGGUF
//	text, err := r.Render(chat.Input{Messages: msgs, AddGenerationPrompt: true})
package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

// Files a model directory may hold its chat template in, in the order
// Load reads them (the first that has a template wins): the file newer
// transformers versions save, a processor's chat_template.json, and
// tokenizer_config.json.
var Files = []string{"chat_template.jinja", "chat_template.json", "tokenizer_config.json"}

// BuiltinSource is the Source of a Renderer without a model template.
const BuiltinSource = "built-in Kimi format"

// Renderer renders the conversations of one model.
type Renderer struct {
	// Source says where the template came from: a file name, "GGUF
	// tokenizer.chat_template", or BuiltinSource.
	Source    string
	templates map[string]*Template // nil for the built-in format
	// textOnly: the template renders string content only (it fails on, or
	// drops, a list of text parts); text parts are joined before rendering.
	textOnly bool
	tokens   map[string]string
}

// Builtin returns the renderer of the built-in Kimi format.
func Builtin() *Renderer {
	return &Renderer{Source: BuiltinSource, tokens: map[string]string{"eos_token": tokenizer.KimiEnd}}
}

// IsBuiltin reports whether r renders the built-in Kimi format.
func (r *Renderer) IsBuiltin() bool { return r.templates == nil }

// Names returns the template names, sorted ("default" for a single
// template; none for the built-in format).
func (r *Renderer) Names() []string {
	var out []string
	for n := range r.templates {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// Token returns a special token of the tokenizer configuration by its
// template name ("bos_token", "eos_token", "unk_token", "pad_token"), or "".
// The built-in format's eos_token is <|im_end|>, the end of a turn.
func (r *Renderer) Token(name string) string { return r.tokens[name] }

// ForModel loads the renderer of the model directory dir (see Load).
func ForModel(dir string) (*Renderer, error) {
	return Load(func(name string) ([]byte, error) {
		return os.ReadFile(filepath.Join(dir, name))
	})
}

// maxFile bounds a template file (the largest published ones are tens of KB).
const maxFile = 16 << 20

// Load finds a model's chat template through read, which returns a file
// of the model directory or an error wrapping fs.ErrNotExist: Files in
// order, the special tokens from tokenizer_config.json. Without a
// template it returns the built-in renderer; a template that does not
// parse is an error naming its file.
func Load(read func(name string) ([]byte, error)) (*Renderer, error) {
	get := func(name string) ([]byte, error) {
		b, err := read(name)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil, nil
			}
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if len(b) > maxFile {
			return nil, fmt.Errorf("%s: %d bytes is too large for a chat template file", name, len(b))
		}
		return b, nil
	}
	var tc tokenizerConfig
	cfg, err := get("tokenizer_config.json")
	if err != nil {
		return nil, err
	}
	if cfg != nil {
		if err := json.Unmarshal(cfg, &tc); err != nil {
			return nil, fmt.Errorf("tokenizer_config.json: %w", err)
		}
	}
	tokens, err := tc.specialTokens()
	if err != nil {
		return nil, fmt.Errorf("tokenizer_config.json: %w", err)
	}
	for _, name := range Files {
		var raw json.RawMessage
		switch name {
		case "tokenizer_config.json":
			raw = tc.ChatTemplate
		default:
			b, err := get(name)
			if err != nil {
				return nil, err
			}
			if b == nil {
				continue
			}
			if strings.HasSuffix(name, ".jinja") {
				raw, _ = json.Marshal(string(b))
			} else {
				var f struct {
					ChatTemplate json.RawMessage `json:"chat_template"`
				}
				if err := json.Unmarshal(b, &f); err != nil {
					return nil, fmt.Errorf("%s: %w", name, err)
				}
				raw = f.ChatTemplate
			}
		}
		r, err := fromJSON(raw, tokens)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if r != nil {
			r.Source = name
			return r, nil
		}
	}
	return Builtin(), nil
}

// FromGGUF returns the renderer of a GGUF file's metadata, read through
// get (gguf.File.Get): tokenizer.chat_template, with bos_token and
// eos_token taken from tokenizer.ggml.tokens at the bos/eos ids; the
// built-in renderer without a template.
func FromGGUF(get func(key string) (any, bool)) (*Renderer, error) {
	v, ok := get("tokenizer.chat_template")
	if !ok {
		return Builtin(), nil
	}
	src, ok := v.(string)
	if !ok {
		return nil, fmt.Errorf("GGUF tokenizer.chat_template is %T, want a string", v)
	}
	tokens := map[string]string{}
	if tv, ok := get("tokenizer.ggml.tokens"); ok {
		if list, ok := tv.([]string); ok {
			for key, name := range map[string]string{"tokenizer.ggml.bos_token_id": "bos_token", "tokenizer.ggml.eos_token_id": "eos_token"} {
				if id, ok := get(key); ok {
					if n, ok := id.(uint32); ok && int(n) < len(list) {
						tokens[name] = list[n]
					}
				}
			}
		}
	}
	raw, _ := json.Marshal(src)
	r, err := fromJSON(raw, tokens)
	if err != nil {
		return nil, fmt.Errorf("GGUF tokenizer.chat_template: %w", err)
	}
	if r == nil {
		return Builtin(), nil
	}
	r.Source = "GGUF tokenizer.chat_template"
	return r, nil
}

// FromSource returns the renderer of one template text with the given
// special tokens (by template name, e.g. "bos_token").
func FromSource(src string, tokens map[string]string) (*Renderer, error) {
	raw, _ := json.Marshal(src)
	r, err := fromJSON(raw, tokens)
	if err != nil {
		return nil, err
	}
	if r == nil {
		return nil, errors.New("empty chat template")
	}
	r.Source = "template text"
	return r, nil
}

// fromJSON builds a renderer from a chat_template value: a string, or a
// list of {"name", "template"}. Null, absent or empty gives nil.
func fromJSON(raw json.RawMessage, tokens map[string]string) (*Renderer, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	srcs := map[string]string{}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("chat_template: %w", err)
		}
		if strings.TrimSpace(s) == "" {
			return nil, nil
		}
		srcs["default"] = s
	case '[':
		var list []struct {
			Name     string `json:"name"`
			Template string `json:"template"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			return nil, fmt.Errorf("chat_template: want a string or a list of {name, template}: %w", err)
		}
		for i, t := range list {
			if t.Name == "" {
				return nil, fmt.Errorf("chat_template[%d] has no name", i)
			}
			if _, dup := srcs[t.Name]; dup {
				return nil, fmt.Errorf("chat_template: two templates named %q", t.Name)
			}
			srcs[t.Name] = t.Template
		}
		if len(srcs) == 0 {
			return nil, nil
		}
	default:
		return nil, errors.New("chat_template: want a string or a list of {name, template}")
	}
	r := &Renderer{templates: map[string]*Template{}, tokens: tokens}
	for name, src := range srcs {
		t, err := Parse(src)
		if err != nil {
			return nil, fmt.Errorf("template %q: %w", name, err)
		}
		t.Tokens = tokens
		r.templates[name] = t
	}
	r.textOnly = r.probeTextOnly()
	return r, nil
}

// probe is the text of the content-format probe.
const probe = "tessera-probe-7f3a"

// probeTextOnly reports whether the default template cannot render a
// message whose content is a list of text parts: rendering it fails or
// leaves the text out (templates written for string content only).
func (r *Renderer) probeTextOnly() bool {
	t := r.templates["default"]
	if t == nil {
		t = r.templates[r.Names()[0]]
	}
	out, err := t.Render(Input{Messages: []Message{{Role: "user", Content: Parts(Part{Type: "text", Text: probe})}}, AddGenerationPrompt: true})
	// A lenient engine may print the list itself (Python's repr of it):
	// that is no rendering of the text either.
	return err != nil || !strings.Contains(out, probe) || strings.Contains(out, "'type'") || strings.Contains(out, `"type"`)
}

// tokenizerConfig is what Load reads of tokenizer_config.json.
type tokenizerConfig struct {
	ChatTemplate json.RawMessage `json:"chat_template"`
	BOS          json.RawMessage `json:"bos_token"`
	EOS          json.RawMessage `json:"eos_token"`
	UNK          json.RawMessage `json:"unk_token"`
	PAD          json.RawMessage `json:"pad_token"`
}

// specialTokens reads the special tokens, each a string or an added-token
// object {"content": …}.
func (tc tokenizerConfig) specialTokens() (map[string]string, error) {
	out := map[string]string{}
	for name, raw := range map[string]json.RawMessage{"bos_token": tc.BOS, "eos_token": tc.EOS, "unk_token": tc.UNK, "pad_token": tc.PAD} {
		raw = bytes.TrimSpace(raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var s string
		if raw[0] == '{' {
			var o struct {
				Content string `json:"content"`
			}
			if err := json.Unmarshal(raw, &o); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
			s = o.Content
		} else if err := json.Unmarshal(raw, &s); err != nil {
			return nil, fmt.Errorf("%s: want a string or {\"content\": …}: %w", name, err)
		}
		out[name] = s
	}
	return out, nil
}

// Render renders the conversation in: with the model's template (the one
// named in.Template; else "tool_use" when tools are given and the model
// has it, else "default"), or in the built-in Kimi format. For a template
// written for string content, lists of text parts are joined into a
// string; images then cannot be placed and are an error. The built-in
// format cannot render tools or tool calls and says so.
func (r *Renderer) Render(in Input) (string, error) {
	if err := checkMessages(in.Messages); err != nil {
		return "", err
	}
	if r.IsBuiltin() {
		return renderBuiltin(in)
	}
	name := in.Template
	if name == "" {
		name = "default"
		if _, ok := r.templates["tool_use"]; ok && len(in.Tools) > 0 {
			name = "tool_use"
		}
	}
	t, ok := r.templates[name]
	if !ok {
		return "", fmt.Errorf("the model has no chat template named %q (it has %s)", name, strings.Join(r.Names(), ", "))
	}
	if r.textOnly {
		msgs := make([]Message, len(in.Messages))
		for i, m := range in.Messages {
			if m.Content.IsParts {
				for _, p := range m.Content.Parts {
					if p.IsImage() {
						return "", fmt.Errorf("message %d has an image, but the model's chat template (%s) renders text content only", i+1, r.Source)
					}
				}
				m.Content = Text(m.Content.String())
			}
			msgs[i] = m
		}
		in.Messages = msgs
	}
	out, err := t.Render(in)
	if err != nil {
		return "", fmt.Errorf("%s: %w", r.Source, err)
	}
	return out, nil
}

// checkMessages refuses what no template can render: a message without a
// role.
func checkMessages(msgs []Message) error {
	for i, m := range msgs {
		if m.Role == "" {
			return fmt.Errorf("message %d has no role", i+1)
		}
	}
	return nil
}

// StopTokens are the token ids that end a reply: eos (the model config's
// eos_token_id), the template's eos_token and the Kimi end-of-turn
// marker, those of them the codec knows.
func (r *Renderer) StopTokens(codec tokenizer.Codec, eos []int) []int {
	stop := slices.Clone(eos)
	for _, s := range []string{r.Token("eos_token"), tokenizer.KimiEnd} {
		if s == "" {
			continue
		}
		if id, ok := codec.TokenID(s); ok && !slices.Contains(stop, id) {
			stop = append(stop, id)
		}
	}
	return stop
}

// renderBuiltin renders in the built-in Kimi format: each message's text
// (text parts joined) with its images as placeholders ahead of it.
func renderBuiltin(in Input) (string, error) {
	if len(in.Tools) > 0 {
		return "", errors.New("the model has no chat template, and the built-in Kimi format does not render tool definitions")
	}
	if in.Template != "" {
		return "", fmt.Errorf("the model has no chat template named %q (it has no chat template)", in.Template)
	}
	msgs := make([]tokenizer.Message, len(in.Messages))
	for i, m := range in.Messages {
		if len(m.ToolCalls) > 0 {
			return "", fmt.Errorf("message %d has tool calls, which the built-in Kimi format does not render (the model has no chat template)", i+1)
		}
		msgs[i] = tokenizer.Message{Role: m.Role, Content: m.Content.String()}
		for _, p := range m.Content.Parts {
			if p.IsImage() {
				msgs[i].Images++
			}
		}
	}
	return tokenizer.RenderKimi(msgs, in.AddGenerationPrompt), nil
}
