//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
)

// chatCompletion(requestJSON, images, onEvent) → Promise<result>: one
// OpenAI chat completion. requestJSON is the request body (chat.Request:
// the same request type and checks as tessera serve's API); images are
// the decoded pixels ({rgba, width, height}) of its image parts in order.
// onEvent("start", promptTokens) comes once the request is accepted and
// rendered, then onEvent("delta", text, tokenId, logprob) for the reply's
// text (stop sequences and stop tokens never reach it; logprob, an entry
// of OpenAI's logprobs.content, with logprobs: true, else null). The
// result is {content, finishReason ("stop" | "length":
// engine.Stats.FinishReason), logprobs (with logprobs: true), promptTokens,
// completionTokens, stats (stats.stopped is "cancelled" for a cancelled
// generation)}, or {error: {message, type, param, code, status}} in
// OpenAI's shape.
func (h *host) chatCompletion(_ js.Value, args []js.Value) any {
	reqJSON, imgs, onEvent := arg(args, 0), arg(args, 1), arg(args, 2)
	return promise(func() (any, error) {
		res, err := h.runChat(reqJSON, imgs, onEvent)
		if err != nil {
			e := chat.AsError(err)
			return toJS(map[string]any{"error": map[string]any{
				"message": e.Message, "type": e.Type, "param": nullable(e.Param), "code": nullable(e.Code), "status": e.Status}})
		}
		return toJS(res)
	})
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// chatResult is what chatCompletion resolves to.
type chatResult struct {
	Content          string              `json:"content"`
	FinishReason     string              `json:"finishReason"`
	Logprobs         []chat.TokenLogprob `json:"logprobs,omitempty"`
	PromptTokens     int                 `json:"promptTokens"`
	CompletionTokens int                 `json:"completionTokens"`
	Stats            engine.Stats        `json:"stats"`
}

func (h *host) runChat(reqJSON, imgs, onEvent js.Value) (*chatResult, error) {
	e := h.engine()
	if e == nil {
		return nil, errors.New("chat: no model is loaded")
	}
	if reqJSON.Type() != js.TypeString || onEvent.Type() != js.TypeFunction {
		return nil, errors.New("chat: want (requestJSON string, images, onEvent function)")
	}
	req, err := chat.ParseRequest([]byte(reqJSON.String()))
	if err != nil {
		return nil, err
	}
	opt, err := engine.ChatOptions(req, e.Cfg.MaxPositions)
	if err != nil {
		return nil, err
	}
	if !imgs.IsUndefined() && !imgs.IsNull() {
		if opt.Images, err = parseImages(imgs); err != nil {
			return nil, err
		}
	}
	if n := len(chat.Images(req.Messages)); n != len(opt.Images) {
		return nil, chat.Invalid("messages", "invalid_value", "the messages have %d image parts but %d images were decoded", n, len(opt.Images))
	}
	ctx, done := h.begin()
	defer done()
	y := newYielder()
	defer y.close()
	res := &chatResult{}
	var content []byte
	opt.MaxContext = e.Cfg.MaxPositions
	opt.OnStart = func(n int) { onEvent.Invoke("start", n) }
	st, err := e.Generate(ctx, opt, func(p engine.Piece) bool {
		res.CompletionTokens++
		lp := js.Null()
		if opt.Logprobs {
			entry := p.ChatLogprob()
			res.Logprobs = append(res.Logprobs, entry)
			lp, _ = toJS(entry)
		}
		if p.Text != "" || opt.Logprobs {
			content = append(content, p.Text...)
			onEvent.Invoke("delta", p.Text, p.ID, lp)
		}
		y.maybe(10 * time.Millisecond) // let a cancel message in
		return ctx.Err() == nil
	})
	if err != nil {
		return nil, engine.APIError(err, fmt.Sprintf("this model's context is %d tokens", e.Cfg.MaxPositions))
	}
	if st.Tail != "" {
		content = append(content, st.Tail...)
		onEvent.Invoke("delta", st.Tail, -1, js.Null())
	}
	res.FinishReason = st.FinishReason()
	res.Content, res.PromptTokens, res.Stats = string(content), st.PromptTokens, st
	return res, nil
}

// begin starts a cancellable generation: cancel() (the JS export) and a
// newer generation stop it; done releases it.
func (h *host) begin() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	h.mu.Lock()
	if h.cancel != nil {
		h.cancel()
	}
	h.cancel = cancel
	h.mu.Unlock()
	return ctx, cancel
}
