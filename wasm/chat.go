//go:build js && wasm

package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/wasm/engine"
)

// loadChat finds the model's chat template through open (chat.Load): the
// built-in Kimi format when the model has none.
func loadChat(open safetensors.Opener) (*chat.Renderer, error) {
	return chat.Load(func(name string) ([]byte, error) {
		src, err := open(name)
		if err != nil {
			return nil, err
		}
		b := make([]byte, src.Size())
		if _, err := src.ReadAt(b, 0); err != nil && len(b) > 0 {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		if r, ok := src.(interface{ release() }); ok {
			r.release()
		}
		return b, nil
	})
}

// chatCompletion(requestJSON, images, onEvent) → Promise<result>: one
// OpenAI chat completion. requestJSON is the request body (chat.Request);
// images are the decoded pixels ({rgba, width, height}) of its image parts
// in order. onEvent("start", promptTokens) comes once the request is
// accepted and rendered, then onEvent("delta", text, tokenId) for the
// reply's text (stop sequences and stop tokens never reach it). The
// result is {content, finishReason ("stop" | "length" | "cancelled"),
// promptTokens, completionTokens, stats}, or {error: {message, type,
// param, code, status}} in OpenAI's shape.
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
	Content          string       `json:"content"`
	FinishReason     string       `json:"finishReason"`
	PromptTokens     int          `json:"promptTokens"`
	CompletionTokens int          `json:"completionTokens"`
	Stats            engine.Stats `json:"stats"`
}

func badRequest(param, format string, args ...any) error {
	return &chat.Error{Status: 400, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
}

func (h *host) runChat(reqJSON, imgs, onEvent js.Value) (*chatResult, error) {
	h.mu.Lock()
	e, rd := h.eng, h.chat
	h.mu.Unlock()
	if e == nil || rd == nil {
		return nil, errors.New("chat: no model is loaded")
	}
	if reqJSON.Type() != js.TypeString || onEvent.Type() != js.TypeFunction {
		return nil, errors.New("chat: want (requestJSON string, images, onEvent function)")
	}
	req, err := chat.ParseRequest([]byte(reqJSON.String()))
	if err != nil {
		return nil, err
	}
	var images []engine.Image
	if !imgs.IsUndefined() && !imgs.IsNull() {
		if images, err = parseImages(imgs); err != nil {
			return nil, err
		}
	}
	if n := len(chat.Images(req.Messages)); n != len(images) {
		return nil, badRequest("messages", "the messages have %d image parts but %d images were decoded", n, len(images))
	}
	if len(images) > 0 && e.Model.Vision == nil {
		return nil, badRequest("messages", "this model has no vision tower: it cannot take images")
	}
	prompt, err := rd.Render(req.Input())
	if err != nil {
		return nil, badRequest("messages", "%v", err)
	}
	codec := e.Codec()
	ids, err := codec.Encode(prompt)
	if err != nil {
		return nil, badRequest("messages", "encoding the prompt: %v", err)
	}
	if ph := e.Cfg.MediaPlaceholderTokenID; len(images) > 0 {
		if n := countID(ids, ph); n != len(images) {
			return nil, badRequest("messages", "the chat template (%s) placed %d image placeholders (token %d) for %d images", rd.Source, n, ph, len(images))
		}
	}
	if len(ids) >= e.Cfg.MaxPositions {
		return nil, &chat.Error{Status: 400, Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded",
			Message: fmt.Sprintf("This model's maximum context length is %d tokens, but the messages take %d.", e.Cfg.MaxPositions, len(ids))}
	}
	maxTok := min(req.MaxNewTokens(e.Cfg.MaxPositions-len(ids)), e.Cfg.MaxPositions-len(ids))
	stopIDs := rd.StopTokens(codec, e.Cfg.EOSTokenIDs)

	ctx, done := h.begin()
	defer done()
	y := newYielder()
	defer y.close()
	onEvent.Invoke("start", len(ids))
	stopper := chat.NewStopper(req.Stop)
	res := &chatResult{}
	var content []byte
	emit := func(text string, id int) {
		if text != "" {
			content = append(content, text...)
			onEvent.Invoke("delta", text, id)
		}
	}
	hitStop := false // a stop sequence ended the reply
	opt := engine.Options{Tokens: ids, MaxTokens: maxTok, Sampler: req.SamplerOptions(), Images: images, ImagesInPrompt: true}
	st, err := e.Generate(ctx, opt, func(p engine.Piece) bool {
		if slices.Contains(stopIDs, p.ID) {
			res.FinishReason = "stop"
			return false
		}
		res.CompletionTokens++
		text, hit := stopper.Push(p.Text)
		emit(text, p.ID)
		if hit {
			hitStop = true
			return false
		}
		y.maybe(10 * time.Millisecond) // let a cancel message in
		return ctx.Err() == nil
	})
	if err != nil {
		return nil, err
	}
	if !hitStop {
		text, hit := stopper.Push(st.Tail)
		emit(text, -1)
		if hitStop = hit; !hit {
			emit(stopper.Flush(), -1)
		}
	}
	switch {
	case hitStop:
		res.FinishReason = "stop"
	case res.FinishReason != "":
	case st.Stopped == "length" || st.Stopped == "context":
		res.FinishReason = "length"
	case st.Stopped == "cancelled":
		res.FinishReason = "cancelled"
	default:
		res.FinishReason = "stop"
	}
	res.Content, res.PromptTokens, res.Stats = string(content), st.PromptTokens, st
	return res, nil
}

func countID(ids []int, id int) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
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
