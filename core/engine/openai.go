package engine

import (
	"context"
	"errors"
	"math"

	"github.com/tessera-llm/tessera/core/chat"
)

// ChatOptions are the generation options of a checked chat-completion
// request (chat.ParseRequest): its conversation (tools and template
// variables included), stop sequences, sampling, log-probabilities,
// response format, and max_completion_tokens or max_tokens, else
// maxTokens. The images of its image parts (decoded, in order) are the
// caller's to add. The API server and the browser's chat API both build
// their options here.
func ChatOptions(r *chat.Request, maxTokens int) (Options, error) {
	g, err := r.Grammar()
	if err != nil {
		return Options{}, err
	}
	in := r.Input()
	o := Options{Chat: &in, Stop: r.Stop, Sampler: r.SamplerOptions(), MaxTokens: r.MaxNewTokens(maxTokens),
		Logprobs: r.Logprobs, Grammar: g}
	if r.TopLogprobs != nil {
		o.TopLogprobs = *r.TopLogprobs
	}
	return o, nil
}

// APIError is a Generate error in OpenAI's shape: ErrContext is 400
// context_length_exceeded (hint, e.g. where the limit is set, follows its
// message), ErrBadRequest 400 invalid_value, a cancelled or timed-out
// request 499, anything else 500.
func APIError(err error, hint string) *chat.Error {
	switch {
	case errors.Is(err, ErrContext):
		e := chat.Invalid("messages", "context_length_exceeded", "%v", err)
		if hint != "" {
			e.Message += " (" + hint + ")"
		}
		return e
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &chat.Error{Status: 499, Type: "invalid_request_error", Code: "cancelled", Message: "the request was cancelled"}
	case errors.Is(err, ErrBadRequest):
		return chat.Invalid("", "invalid_value", "%v", err)
	}
	return chat.AsError(err)
}

// Token is the piece's own token text (with log-probabilities; the
// streamed Text may hold back or join pieces).
func (p Piece) Token() string {
	if p.TokenText != "" {
		return p.TokenText
	}
	return p.Text
}

// ChatLogprob is the piece's entry of a chat completion's
// logprobs.content (Options.Logprobs).
func (p Piece) ChatLogprob() chat.TokenLogprob {
	tok := p.Token()
	lp := chat.TokenLogprob{Token: tok, Logprob: finite(p.Logprob), Bytes: byteList(tok), TopLogprobs: []chat.TopLogprob{}}
	for _, t := range p.Top {
		lp.TopLogprobs = append(lp.TopLogprobs, chat.TopLogprob{Token: t.Text, Logprob: finite(t.Logprob), Bytes: byteList(t.Text)})
	}
	return lp
}

// CompletionLogprob is the piece's token, log-probability and top
// alternatives as a legacy completion's logprobs lists them.
func (p Piece) CompletionLogprob() (token string, logprob float32, top map[string]float32) {
	top = map[string]float32{}
	for _, t := range p.Top {
		top[t.Text] = finite(t.Logprob)
	}
	return p.Token(), finite(p.Logprob), top
}

func byteList(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// finite maps −Inf (a masked token) to the most negative float32, as JSON
// has no infinities.
func finite(v float32) float32 {
	if math.IsInf(float64(v), -1) {
		return -math.MaxFloat32
	}
	return v
}
