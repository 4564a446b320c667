package engine

import (
	"fmt"
	"strings"

	"github.com/tessera-llm/tessera/core/chat"
)

// Chat is the engine's chat renderer: the model's chat template, else the
// built-in Kimi format (chat.Load).
func (e *Engine) Chat() *chat.Renderer { return e.chat }

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
