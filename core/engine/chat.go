package engine

import (
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// Message is one chat message: a role, its text and the number of images
// attached to it (placed before the text; their pixels go in
// Options.Images, in message order).
type Message = tokenizer.Message

// Chat is the engine's chat renderer: the model's chat template, else the
// built-in Kimi format (chat.Load).
func (e *Engine) Chat() *chat.Renderer { return e.chat }

// chatInput converts engine messages to core/chat's shape: each message's
// images as image parts ahead of its text.
func chatInput(msgs []Message, addGenerationPrompt bool) chat.Input {
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		out[i] = chat.Message{Role: m.Role, Content: chat.Text(m.Content)}
		if m.Images > 0 {
			parts := make([]chat.Part, 0, m.Images+1)
			for range m.Images {
				parts = append(parts, chat.Part{Type: "image"})
			}
			out[i].Content = chat.Parts(append(parts, chat.Part{Type: "text", Text: m.Content})...)
		}
	}
	return chat.Input{Messages: out, AddGenerationPrompt: addGenerationPrompt}
}

// RenderChat renders messages with the model's chat template (Chat),
// ending with the assistant's generation prompt when addGenerationPrompt
// is set. It is the one place the engine renders chat.
func (e *Engine) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	return e.chat.Render(chatInput(msgs, addGenerationPrompt))
}

// chatStops are the tokens that end an assistant turn: the configured EOS
// ids, the template's eos_token and the Kimi end-of-turn marker
// (chat.Renderer.StopTokens).
func (e *Engine) chatStops() []int { return e.chat.StopTokens(e.codec, e.Cfg.EOSTokenIDs) }

// encodeChat renders and tokenizes a conversation. The image placeholder
// stands for images only: it is removed from message text (a reply that
// emitted it would otherwise add a phantom image).
func (e *Engine) encodeChat(in chat.Input) ([]int, error) {
	if ph := e.TokenText(e.Cfg.MediaPlaceholderTokenID); ph != "" {
		clean := make([]chat.Message, len(in.Messages))
		for i, m := range in.Messages {
			m.Content.Text = strings.ReplaceAll(m.Content.Text, ph, "")
			if m.Content.IsParts {
				parts := make([]chat.Part, len(m.Content.Parts))
				for j, p := range m.Content.Parts {
					p.Text = strings.ReplaceAll(p.Text, ph, "")
					parts[j] = p
				}
				m.Content.Parts = parts
			}
			clean[i] = m
		}
		in.Messages = clean
	}
	text, err := e.chat.Render(in)
	if err != nil {
		return nil, err
	}
	ids, err := e.codec.Encode(text)
	if err != nil {
		return nil, fmt.Errorf("encoding the rendered chat: %w", err)
	}
	return ids, nil
}
