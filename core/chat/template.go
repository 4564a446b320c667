package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/ardanlabs/jinja"
)

// Template is a compiled Jinja chat template, rendered the way Hugging
// Face transformers' apply_chat_template renders it: trim_blocks and
// lstrip_blocks on, {% break %}/{% continue %} and the {% generation %}
// tag available, the globals raise_exception(msg) and strftime_now(fmt),
// tojson writing JSON as Python's json.dumps (ensure_ascii off, keys in
// their given order; indent, separators and sort_keys accepted), and the
// tokenizer's special tokens (bos_token, eos_token, …) as variables.
//
// The Jinja engine is github.com/ardanlabs/jinja. Its whitespace control
// applies a tag's trimming to the nearest text even when other tags stand
// between (Jinja trims only the adjacent text); Parse guards against that
// by putting an invisible separator (guard) between such adjacent tags,
// removed from the output. The engine is also more lenient than Python
// where a template does something its authors did not intend (iterating
// None, adding a string and a list, indexing past a list's end): jinja2
// raises, it renders. Every conversation a template takes renders byte for
// byte as jinja2 renders it (TestGoldens).
type Template struct {
	src  string
	tmpl *jinja.Template
	// Tokens are the special tokens passed to the template by name
	// ("bos_token", "eos_token", "unk_token", "pad_token").
	Tokens map[string]string
	// Now is the clock of strftime_now; time.Now when nil.
	Now func() time.Time
}

// guard is U+FDD0, a Unicode noncharacter ("for internal use"): the
// separator Parse inserts between adjacent tags. Inputs holding it are
// refused, so removing it from the output removes only what Parse put in.
const guard = "\uFDD0"

// Parse compiles a chat template. The error says what is wrong, with its
// line where the engine knows it (the guard adds no lines).
func Parse(src string) (t0 *Template, err error) {
	if strings.Contains(src, guard) {
		return nil, errors.New("chat template contains U+FDD0, a Unicode noncharacter tessera reserves")
	}
	defer recoverAs(&err, "parsing the chat template")
	t, err := jinja.Compile(guardTags(src))
	if err != nil {
		return nil, fmt.Errorf("chat template does not parse: %w", err)
	}
	return &Template{src: src, tmpl: t, Tokens: map[string]string{}}, nil
}

// Source returns the template's text.
func (t *Template) Source() string { return t.src }

// Input is what a template renders: the conversation, tool definitions
// and the switches HF passes to apply_chat_template.
type Input struct {
	Messages []Message
	// Tools are OpenAI-style tool definitions ({"type": "function",
	// "function": {name, description, parameters}}), as JSON; templates
	// see them with their key order kept (tojson writes them back as given).
	Tools []json.RawMessage
	// AddGenerationPrompt ends the text with the opening of an assistant
	// turn for the model to continue.
	AddGenerationPrompt bool
	// Vars are further template variables (e.g. "enable_thinking": false);
	// they may not replace messages, tools or add_generation_prompt.
	Vars map[string]any
	// Template names the template to use when the model has several
	// (tokenizer_config.json's list form); Renderer.Render picks when empty.
	Template string
}

// Render renders in. A template that fails (an undefined operation, or
// raise_exception) returns an error carrying the template's message.
func (t *Template) Render(in Input) (_ string, err error) {
	defer recoverAs(&err, "rendering the chat template")
	data := map[string]jinja.Value{}
	for k, v := range t.Tokens {
		data[k] = jinja.NewString(v)
	}
	for k, v := range in.Vars {
		switch k {
		case "messages", "tools", "add_generation_prompt":
			return "", fmt.Errorf("chat template variable %q is set from the request, not from Vars", k)
		}
		jv, err := goValue(v)
		if err != nil {
			return "", fmt.Errorf("chat template variable %q: %w", k, err)
		}
		data[k] = jv
	}
	raw, err := json.Marshal(in.Messages)
	if err != nil {
		return "", fmt.Errorf("chat messages: %w", err)
	}
	if bytes.Contains(raw, []byte(guard)) {
		return "", errors.New("chat messages contain U+FDD0, a Unicode noncharacter tessera reserves")
	}
	if data["messages"], err = decodeValue(raw); err != nil {
		return "", fmt.Errorf("chat messages: %w", err)
	}
	data["tools"] = jinja.None()
	if len(in.Tools) > 0 {
		var b bytes.Buffer
		b.WriteByte('[')
		for i, tool := range in.Tools {
			if i > 0 {
				b.WriteByte(',')
			}
			if !json.Valid(tool) {
				return "", fmt.Errorf("tool %d is not valid JSON", i)
			}
			b.Write(tool)
		}
		b.WriteByte(']')
		if bytes.Contains(b.Bytes(), []byte(guard)) {
			return "", errors.New("tools contain U+FDD0, a Unicode noncharacter tessera reserves")
		}
		if data["tools"], err = decodeValue(b.Bytes()); err != nil {
			return "", fmt.Errorf("tools: %w", err)
		}
	}
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(in.AddGenerationPrompt)
	now := t.Now
	if now == nil {
		now = time.Now
	}
	data["strftime_now"] = jinja.NewCallable("strftime_now", func(args []jinja.Value, _ map[string]jinja.Value) (jinja.Value, error) {
		if len(args) != 1 || !args[0].IsString() {
			return jinja.Undefined(), errors.New("strftime_now takes one format string")
		}
		return jinja.NewString(Strftime(now(), args[0].AsString())), nil
	})
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", fmt.Errorf("chat template: %w", err)
	}
	return strings.ReplaceAll(out, guard, ""), nil
}

// recoverAs turns a panic of the Jinja engine (a template it mishandles)
// into an error: a model's template is input, never a crash.
func recoverAs(err *error, what string) {
	if r := recover(); r != nil {
		*err = fmt.Errorf("%s: internal error of the Jinja engine: %v", what, r)
	}
}

// goValue converts a Go value to a template value through JSON (maps get
// sorted keys).
func goValue(v any) (jinja.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return jinja.Value{}, err
	}
	return decodeValue(b)
}

// decodeValue parses JSON into template values, keeping the key order of
// objects (Python dicts keep it; tojson writes it back).
func decodeValue(b []byte) (jinja.Value, error) {
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	v, err := decodeNext(d, 0)
	if err != nil {
		return jinja.Value{}, err
	}
	if d.More() {
		return jinja.Value{}, errors.New("trailing data after the JSON value")
	}
	return v, nil
}

// maxDepth bounds the nesting of decoded JSON.
const maxDepth = 200

func decodeNext(d *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxDepth {
		return jinja.Value{}, fmt.Errorf("JSON nested deeper than %d levels", maxDepth)
	}
	tok, err := d.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch v := tok.(type) {
	case json.Delim:
		switch v {
		case '[':
			items := []jinja.Value{}
			for d.More() {
				it, err := decodeNext(d, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				items = append(items, it)
			}
			_, err := d.Token() // ]
			return jinja.NewList(items), err
		case '{':
			out := jinja.NewDict()
			for d.More() {
				k, err := d.Token()
				if err != nil {
					return jinja.Value{}, err
				}
				it, err := decodeNext(d, depth+1)
				if err != nil {
					return jinja.Value{}, err
				}
				out.AsDict().Set(k.(string), it)
			}
			_, err := d.Token() // }
			return out, err
		}
		return jinja.Value{}, fmt.Errorf("unexpected %v", v)
	default: // nil, bool, json.Number, string
		return jinja.FromGoValue(v), nil
	}
}
