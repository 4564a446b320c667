package tokenizer

import "strings"

// Message is one turn of a conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user", "assistant", "tool", or another name
	Content string `json:"content"`
	Images  int    `json:"images,omitempty"` // images attached to this turn, placed before Content
}

// Kimi chat-format markers (special tokens of the Kimi tokenizers).
const (
	KimiSystem    = "<|im_system|>"
	KimiUser      = "<|im_user|>"
	KimiAssistant = "<|im_assistant|>"
	KimiMiddle    = "<|im_middle|>"
	KimiEnd       = "<|im_end|>"
	// KimiImage stands for one image. The vision encoder replaces the single
	// <|media_pad|> with that image's patch embeddings.
	KimiImage = "<|media_start|>image<|media_content|><|media_pad|><|media_end|>"
	// DefaultKimiSystemPrompt is what the Kimi K2 Instruct template inserts
	// when the conversation does not start with a system message.
	DefaultKimiSystemPrompt = "You are Kimi, an AI assistant created by Moonshot AI."
)

// RenderKimi renders a conversation in the Kimi chat format, as the public
// Kimi K2 / Kimi-VL chat templates do:
//
//	<|im_system|>system<|im_middle|>…<|im_end|><|im_user|>user<|im_middle|>…<|im_end|>
//
// Each turn is ROLE_MARKER + name + <|im_middle|> + content + <|im_end|>,
// with no separators or newlines between turns. The marker is <|im_user|>
// for "user", <|im_assistant|> for "assistant" and <|im_system|> for
// everything else ("system", "tool", any other role), whose name is the
// role itself. When the first message is not a system message,
// DefaultKimiSystemPrompt is inserted as one. Images become KimiImage
// placeholders ahead of the turn's text. With addGenerationPrompt the
// output ends with "<|im_assistant|>assistant<|im_middle|>" for the model
// to continue. No BOS token is added (the Kimi template adds none).
//
// Not covered: tool declarations (tool_declare), tool-call sections and
// the thinking-model variants' reasoning blocks.
func RenderKimi(msgs []Message, addGenerationPrompt bool) string {
	var b strings.Builder
	if len(msgs) == 0 || msgs[0].Role != "system" {
		writeKimiTurn(&b, Message{Role: "system", Content: DefaultKimiSystemPrompt})
	}
	for _, m := range msgs {
		writeKimiTurn(&b, m)
	}
	if addGenerationPrompt {
		b.WriteString(KimiAssistant + "assistant" + KimiMiddle)
	}
	return b.String()
}

func writeKimiTurn(b *strings.Builder, m Message) {
	switch m.Role {
	case "user":
		b.WriteString(KimiUser)
	case "assistant":
		b.WriteString(KimiAssistant)
	default:
		b.WriteString(KimiSystem)
	}
	b.WriteString(m.Role)
	b.WriteString(KimiMiddle)
	for range max(m.Images, 0) {
		b.WriteString(KimiImage)
	}
	b.WriteString(m.Content)
	b.WriteString(KimiEnd)
}
