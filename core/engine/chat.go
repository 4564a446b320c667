package engine

import (
	"strings"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

// Message is one chat message: a role, its text and the number of images
// attached to it (placed before the text; their pixels go in
// Options.Images, in message order).
type Message = tokenizer.Message

// RenderChat renders messages with the model's chat template, ending with
// the assistant's generation prompt when addGenerationPrompt is set. It
// is the one place the engine renders chat; today it is the built-in Kimi
// format (tokenizer.RenderKimi).
func (e *Engine) RenderChat(msgs []Message, addGenerationPrompt bool) (string, error) {
	return tokenizer.RenderKimi(msgs, addGenerationPrompt), nil
}

// chatStops are the tokens that end an assistant turn besides the
// configured EOS ids: the chat format's end-of-turn marker.
func (e *Engine) chatStops() []int {
	stop := append([]int(nil), e.Cfg.EOSTokenIDs...)
	if id, ok := e.codec.TokenID(tokenizer.KimiEnd); ok {
		stop = append(stop, id)
	}
	return stop
}

// encodeChat renders and tokenizes messages. The image placeholder stands
// for images only: it is removed from message text (a reply that emitted
// it would otherwise add a phantom image).
func (e *Engine) encodeChat(msgs []Message, addGenerationPrompt bool) ([]int, error) {
	if ph := e.TokenText(e.Cfg.MediaPlaceholderTokenID); ph != "" {
		clean := make([]Message, len(msgs))
		for i, m := range msgs {
			m.Content = strings.ReplaceAll(m.Content, ph, "")
			clean[i] = m
		}
		msgs = clean
	}
	text, err := e.RenderChat(msgs, addGenerationPrompt)
	if err != nil {
		return nil, err
	}
	return e.codec.Encode(text)
}
