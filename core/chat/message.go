package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// Message is one turn of a conversation, in the shape of OpenAI's chat
// API and of Hugging Face chat templates.
type Message struct {
	Role    string  `json:"role"` // "system", "user", "assistant", "tool", …
	Content Content `json:"content"`
	// Name is the speaker's name (OpenAI's "name"), passed to templates
	// that use it.
	Name string `json:"name,omitempty"`
	// ToolCalls are the calls an assistant turn made; ToolCallID names the
	// call a "tool" turn answers.
	ToolCalls  []ToolCall `json:"tool_calls,omitempty"`
	ToolCallID string     `json:"tool_call_id,omitempty"`
	// ReasoningContent is an assistant turn's thinking, for templates of
	// reasoning models that render it.
	ReasoningContent string `json:"reasoning_content,omitempty"`
}

// Content is a message's content: text, a list of parts (text and
// images), or null (an assistant turn that only calls tools).
type Content struct {
	Text  string
	Parts []Part // used when IsParts
	// IsParts: the content is a list of parts (possibly empty).
	IsParts bool
	// Null: the content is JSON null.
	Null bool
}

// Text returns text content.
func Text(s string) Content { return Content{Text: s} }

// Parts returns content made of parts.
func Parts(p ...Part) Content { return Content{Parts: p, IsParts: true} }

// WithImages is content of n images followed by text (just the text when
// n is 0), as a turn with attached images; each image takes the next of
// the request's decoded images.
func WithImages(n int, text string) Content {
	if n == 0 {
		return Text(text)
	}
	parts := make([]Part, 0, n+1)
	for range n {
		parts = append(parts, Part{Type: "image"})
	}
	return Parts(append(parts, Part{Type: "text", Text: text})...)
}

// Part is one element of list content: {"type": "text", "text": …} or an
// image, {"type": "image_url", "image_url": {"url": …}} (OpenAI) or
// {"type": "image"} (Hugging Face).
type Part struct {
	Type     string    `json:"type"`
	Text     string    `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is an image part's source: an http(s) URL or a data: URL.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// IsImage reports whether the part is an image.
func (p Part) IsImage() bool { return p.Type == "image" || p.Type == "image_url" }

// ToolCall is one function call of an assistant turn.
type ToolCall struct {
	ID       string       `json:"id,omitempty"`
	Type     string       `json:"type"`
	Function FunctionCall `json:"function"`
}

// FunctionCall names the function and its arguments: a JSON object, or a
// string holding JSON (as OpenAI sends them); templates see either as
// given, with the object's key order kept.
type FunctionCall struct {
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments,omitempty"`
}

// UnmarshalJSON reads a string, an array of parts or null.
func (c *Content) UnmarshalJSON(b []byte) error {
	*c = Content{}
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		c.Null = true
		return nil
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Text)
	case len(b) > 0 && b[0] == '[':
		c.IsParts = true
		if err := json.Unmarshal(b, &c.Parts); err != nil {
			return fmt.Errorf("content parts: %w", err)
		}
		for i, p := range c.Parts {
			switch {
			case p.Type == "text":
			case p.Type == "image_url" && (p.ImageURL == nil || p.ImageURL.URL == ""):
				return fmt.Errorf("content part %d: an image_url part needs image_url.url", i)
			case p.IsImage():
			case p.Type == "":
				return fmt.Errorf("content part %d has no type (want text, image_url or image)", i)
			}
		}
		return nil
	}
	return errors.New("content must be a string, an array of parts or null")
}

// MarshalJSON writes the content as it was given.
func (c Content) MarshalJSON() ([]byte, error) {
	switch {
	case c.Null:
		return []byte("null"), nil
	case c.IsParts:
		if c.Parts == nil {
			return []byte("[]"), nil
		}
		return json.Marshal(c.Parts)
	}
	return json.Marshal(c.Text)
}

// String is the content's text: the text, or the text parts joined (images
// left out).
func (c Content) String() string {
	if !c.IsParts {
		return c.Text
	}
	var b bytes.Buffer
	for _, p := range c.Parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// Images returns the image parts of the conversation in order: the order
// in which a template places their placeholders.
func Images(msgs []Message) []Part {
	var out []Part
	for _, m := range msgs {
		for _, p := range m.Content.Parts {
			if p.IsImage() {
				out = append(out, p)
			}
		}
	}
	return out
}
