// Package api serves OpenAI's HTTP API — chat completions, completions,
// models — on a tessera engine, for `tessera serve`: requests decoded with
// limits, generations scheduled on the engine's sequences with a bounded
// queue, streamed as server-sent events, errors in OpenAI's shape.
package api

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
)

// Config are the API's settings and limits.
type Config struct {
	ModelID   string // the id /v1/models lists and requests must name
	APIKey    string // "": no authentication (loopback only)
	MaxBody   int64  // request body bytes
	MaxQueue  int    // requests waiting for a free sequence beyond the running ones
	Context   int    // prompt + max_tokens per request (tokens)
	MaxOutput int    // max_tokens ceiling (and default)
}

// Server serves OpenAI's chat completions, completions and models
// endpoints on an engine: one generation per sequence (engine.Parallel at
// once), the rest queued up to MaxQueue, then 429.
type Server struct {
	cfg      Config
	e        *engine.Engine
	created  int64
	inflight atomic.Int64
}

// New serves e's model as cfg.ModelID. Generations wait for a free
// sequence (e.Wait is set).
func New(e *engine.Engine, cfg Config) *Server {
	e.Wait = true
	return &Server{cfg: cfg, e: e, created: time.Now().Unix()}
}

// apiError is an OpenAI-shaped error response.
type apiError struct {
	status  int
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

func (e *apiError) Error() string { return e.Message }

func badRequest(param, code, format string, args ...any) *apiError {
	return newError(http.StatusBadRequest, "invalid_request_error", param, code, format, args...)
}

func newError(status int, typ, param, code, format string, args ...any) *apiError {
	e := &apiError{status: status, Message: fmt.Sprintf(format, args...), Type: typ}
	if param != "" {
		e.Param = &param
	}
	if code != "" {
		e.Code = &code
	}
	return e
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, map[string]any{"error": e})
}

// NotFound answers an API request that no server can take (no model is
// loaded) with an OpenAI-shaped 404 carrying code and message.
func NotFound(w http.ResponseWriter, code, message string) {
	writeError(w, newError(http.StatusNotFound, "invalid_request_error", "", code, "%s", message))
}

func (a *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if a.cfg.APIKey != "" {
		got, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || subtle.ConstantTimeCompare([]byte(got), []byte(a.cfg.APIKey)) != 1 {
			writeError(w, newError(http.StatusUnauthorized, "invalid_request_error", "", "invalid_api_key", "missing or wrong API key (Authorization: Bearer KEY, as tessera serve --api-key sets)"))
			return
		}
	}
	route := map[string]struct {
		method string
		h      func(http.ResponseWriter, *http.Request) *apiError
	}{
		"/v1/models":                  {http.MethodGet, a.models},
		"/v1/models/" + a.cfg.ModelID: {http.MethodGet, a.model},
		"/v1/chat/completions":        {http.MethodPost, a.chat},
		"/v1/completions":             {http.MethodPost, a.completions},
		"/v1/stats":                   {http.MethodGet, a.stats},
	}
	rt, ok := route[r.URL.Path]
	if !ok {
		if strings.HasPrefix(r.URL.Path, "/v1/models/") {
			writeError(w, newError(http.StatusNotFound, "invalid_request_error", "model", "model_not_found", "the model %q does not exist (this server serves %q)", strings.TrimPrefix(r.URL.Path, "/v1/models/"), a.cfg.ModelID))
			return
		}
		writeError(w, newError(http.StatusNotFound, "invalid_request_error", "", "unknown_url", "unknown endpoint %s %s", r.Method, r.URL.Path))
		return
	}
	if r.Method != rt.method {
		w.Header().Set("Allow", rt.method)
		writeError(w, newError(http.StatusMethodNotAllowed, "invalid_request_error", "", "method_not_allowed", "%s %s: use %s", r.Method, r.URL.Path, rt.method))
		return
	}
	if err := rt.h(w, r); err != nil {
		writeError(w, err)
	}
}

func (a *Server) modelObject() map[string]any {
	return map[string]any{"id": a.cfg.ModelID, "object": "model", "created": a.created, "owned_by": "tessera"}
}

func (a *Server) models(w http.ResponseWriter, _ *http.Request) *apiError {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{a.modelObject()}})
	return nil
}

func (a *Server) model(w http.ResponseWriter, _ *http.Request) *apiError {
	writeJSON(w, http.StatusOK, a.modelObject())
	return nil
}

// stats reports the engine's totals: requests, tokens, prefix-cache hits
// and prefill tokens saved.
func (a *Server) stats(w http.ResponseWriter, _ *http.Request) *apiError {
	writeJSON(w, http.StatusOK, map[string]any{"backend": a.e.Backend, "parallel": a.e.Parallel(), "inflight": a.inflight.Load(),
		"goroutines": runtime.NumGoroutine(), "totals": a.e.Totals()})
	return nil
}

// decode reads a JSON request body of at most MaxBody bytes into v.
func (a *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return newError(http.StatusUnsupportedMediaType, "invalid_request_error", "", "unsupported_media_type", "Content-Type %q: send application/json", ct)
	}
	body := http.MaxBytesReader(w, r.Body, a.cfg.MaxBody)
	dec := json.NewDecoder(body)
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return newError(http.StatusRequestEntityTooLarge, "invalid_request_error", "", "request_too_large", "the request body is larger than %d bytes (tessera serve --max-body)", a.cfg.MaxBody)
		}
		return badRequest("", "invalid_json", "the request body is not valid JSON: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return badRequest("", "invalid_json", "the request body holds more than one JSON value")
	}
	return nil
}

// common are the sampling fields of both completion requests.
type common struct {
	Model            string          `json:"model"`
	Stream           bool            `json:"stream"`
	StreamOptions    *streamOptions  `json:"stream_options"`
	MaxTokens        *int            `json:"max_tokens"`
	Temperature      *float64        `json:"temperature"`
	TopP             *float64        `json:"top_p"`
	Seed             *int64          `json:"seed"`
	Stop             json.RawMessage `json:"stop"`
	N                *int            `json:"n"`
	PresencePenalty  *float64        `json:"presence_penalty"`
	FrequencyPenalty *float64        `json:"frequency_penalty"`
}

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// options turns the common fields into engine options.
func (a *Server) options(c *common, maxTokens *int) (engine.Options, *apiError) {
	var o engine.Options
	if c.Model == "" {
		return o, badRequest("model", "missing_required_parameter", "model is required (this server serves %q)", a.cfg.ModelID)
	}
	if c.Model != a.cfg.ModelID {
		return o, newError(http.StatusNotFound, "invalid_request_error", "model", "model_not_found", "the model %q does not exist (this server serves %q)", c.Model, a.cfg.ModelID)
	}
	if c.N != nil && *c.N != 1 {
		return o, badRequest("n", "unsupported_value", "n must be 1")
	}
	for name, p := range map[string]*float64{"presence_penalty": c.PresencePenalty, "frequency_penalty": c.FrequencyPenalty} {
		if p != nil && *p != 0 {
			return o, badRequest(name, "unsupported_value", "%s is not supported (only 0)", name)
		}
	}
	if mt := maxTokens; mt != nil || c.MaxTokens != nil {
		if mt == nil {
			mt = c.MaxTokens
		}
		if *mt < 1 || *mt > a.cfg.MaxOutput {
			return o, badRequest("max_tokens", "invalid_value", "max_tokens must be in [1, %d], got %d", a.cfg.MaxOutput, *mt)
		}
		o.MaxTokens = *mt
	}
	o.Sampler = generate.SamplerOptions{Temperature: 1, TopP: 1}
	if c.Temperature != nil {
		if *c.Temperature < 0 || *c.Temperature > 2 || math.IsNaN(*c.Temperature) {
			return o, badRequest("temperature", "invalid_value", "temperature must be in [0, 2], got %g", *c.Temperature)
		}
		o.Sampler.Temperature = float32(*c.Temperature)
	}
	if c.TopP != nil {
		if *c.TopP <= 0 || *c.TopP > 1 || math.IsNaN(*c.TopP) {
			return o, badRequest("top_p", "invalid_value", "top_p must be in (0, 1], got %g", *c.TopP)
		}
		o.Sampler.TopP = float32(*c.TopP)
	}
	if c.Seed != nil {
		o.Sampler.Seed = uint64(*c.Seed)
	} else {
		var b [8]byte
		rand.Read(b[:])
		for _, x := range b {
			o.Sampler.Seed = o.Sampler.Seed<<8 | uint64(x)
		}
	}
	if len(c.Stop) > 0 && string(c.Stop) != "null" {
		var one string
		if err := json.Unmarshal(c.Stop, &one); err == nil {
			o.Stop = []string{one}
		} else if err := json.Unmarshal(c.Stop, &o.Stop); err != nil || len(o.Stop) > 4 {
			return o, badRequest("stop", "invalid_value", "stop must be a string or a list of up to 4 strings")
		}
	}
	return o, nil
}

// chatRequest is a POST /v1/chat/completions body.
type chatRequest struct {
	common
	Messages            []chatMessage   `json:"messages"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Logprobs            bool            `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	ResponseFormat      *responseFormat `json:"response_format"`
	Tools               json.RawMessage `json:"tools"`
}

type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type contentPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL string `json:"url"`
	} `json:"image_url"`
}

type responseFormat struct {
	Type       string `json:"type"`
	JSONSchema *struct {
		Name   string          `json:"name"`
		Schema json.RawMessage `json:"schema"`
	} `json:"json_schema"`
}

// messages converts chat messages (text, or parts of text and image_url
// with data: URLs) to the engine's messages and images.
func messages(in []chatMessage) ([]chat.Message, []engine.Image, *apiError) {
	if len(in) == 0 {
		return nil, nil, badRequest("messages", "missing_required_parameter", "messages must hold at least one message")
	}
	var out []chat.Message
	var imgs []engine.Image
	for i, m := range in {
		param := fmt.Sprintf("messages[%d]", i)
		role := m.Role
		switch role {
		case "developer":
			role = "system"
		case "system", "user", "assistant", "tool":
		default:
			return nil, nil, badRequest(param+".role", "invalid_value", "%s.role %q: want system, developer, user, assistant or tool", param, m.Role)
		}
		msg, images := chat.Message{Role: role}, 0
		var text string
		var parts []contentPart
		switch {
		case len(m.Content) == 0 || string(m.Content) == "null":
		case json.Unmarshal(m.Content, &text) == nil:
			msg.Content = chat.Text(text)
		case json.Unmarshal(m.Content, &parts) == nil:
			var b strings.Builder
			for j, p := range parts {
				pp := fmt.Sprintf("%s.content[%d]", param, j)
				switch p.Type {
				case "text":
					b.WriteString(p.Text)
				case "image_url":
					if role != "user" {
						return nil, nil, badRequest(pp, "invalid_value", "%s: images go in user messages", pp)
					}
					if p.ImageURL == nil {
						return nil, nil, badRequest(pp+".image_url", "missing_required_parameter", "%s needs image_url.url", pp)
					}
					data, err := dataURL(p.ImageURL.URL)
					if err != nil {
						return nil, nil, badRequest(pp+".image_url", "invalid_image_url", "%s: %v", pp, err)
					}
					imgs = append(imgs, engine.Image{Data: data})
					images++
				default:
					return nil, nil, badRequest(pp+".type", "invalid_value", "%s.type %q: want text or image_url", pp, p.Type)
				}
			}
			msg.Content = chat.WithImages(images, b.String())
		default:
			return nil, nil, badRequest(param+".content", "invalid_value", "%s.content must be a string or a list of content parts", param)
		}
		out = append(out, msg)
	}
	return out, imgs, nil
}

// dataURL decodes a data:[type];base64,… URL; tessera does not fetch
// images from the network.
func dataURL(u string) ([]byte, error) {
	rest, ok := strings.CutPrefix(u, "data:")
	if !ok {
		return nil, errors.New("only data: URLs are accepted (tessera serves offline and does not fetch images); send data:image/png;base64,…")
	}
	meta, payload, ok := strings.Cut(rest, ",")
	if !ok || !strings.HasSuffix(meta, ";base64") {
		return nil, errors.New("a data: URL must be base64-encoded (data:image/png;base64,…)")
	}
	b, err := base64.StdEncoding.DecodeString(payload)
	if err != nil {
		return nil, fmt.Errorf("bad base64 in the data: URL: %v", err)
	}
	return b, nil
}

func (a *Server) chat(w http.ResponseWriter, r *http.Request) *apiError {
	var req chatRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	o, aerr := a.options(&req.common, req.MaxCompletionTokens)
	if aerr != nil {
		return aerr
	}
	if len(req.Tools) > 0 && string(req.Tools) != "null" && string(req.Tools) != "[]" {
		return badRequest("tools", "unsupported_parameter", "tools are not supported")
	}
	msgs, imgs, aerr := messages(req.Messages)
	if aerr != nil {
		return aerr
	}
	o.Chat, o.Images = &chat.Input{Messages: msgs}, imgs
	o.Logprobs = req.Logprobs
	if req.TopLogprobs != nil {
		if !req.Logprobs || *req.TopLogprobs < 0 || *req.TopLogprobs > 20 {
			return badRequest("top_logprobs", "invalid_value", "top_logprobs must be in [0, 20] and needs logprobs: true")
		}
		o.TopLogprobs = *req.TopLogprobs
	}
	if f := req.ResponseFormat; f != nil {
		switch f.Type {
		case "text", "":
		case "json_object":
			o.Grammar = grammar.JSONObject()
		case "json_schema":
			if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
				return badRequest("response_format.json_schema", "missing_required_parameter", "response_format json_schema needs json_schema.schema")
			}
			g, err := grammar.Schema(f.JSONSchema.Schema)
			if err != nil {
				return badRequest("response_format.json_schema.schema", "invalid_value", "%v", err)
			}
			o.Grammar = g
		default:
			return badRequest("response_format.type", "invalid_value", "response_format.type %q: want text, json_object or json_schema", f.Type)
		}
	}
	return a.run(w, r, &req.common, o, "chat.completion", "chatcmpl-")
}

// completionRequest is a POST /v1/completions body.
type completionRequest struct {
	common
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
}

func (a *Server) completions(w http.ResponseWriter, r *http.Request) *apiError {
	var req completionRequest
	if err := a.decode(w, r, &req); err != nil {
		return err
	}
	if req.MaxTokens == nil {
		sixteen := 16 // OpenAI's default for completions
		req.MaxTokens = &sixteen
	}
	o, aerr := a.options(&req.common, nil)
	if aerr != nil {
		return aerr
	}
	if req.Echo || (req.Suffix != nil && *req.Suffix != "") {
		return badRequest("echo", "unsupported_parameter", "echo and suffix are not supported")
	}
	var one string
	var many []string
	var ids []int
	switch {
	case json.Unmarshal(req.Prompt, &one) == nil:
		o.Prompt = one
	case json.Unmarshal(req.Prompt, &many) == nil && len(many) == 1:
		o.Prompt = many[0]
	case json.Unmarshal(req.Prompt, &ids) == nil && len(ids) > 0:
		o.Tokens = ids
	default:
		return badRequest("prompt", "invalid_value", "prompt must be a string, a list of one string, or a list of token ids")
	}
	if o.Prompt == "" && len(o.Tokens) == 0 {
		return badRequest("prompt", "invalid_value", "the prompt is empty")
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 5 {
			return badRequest("logprobs", "invalid_value", "logprobs must be in [0, 5]")
		}
		o.Logprobs, o.TopLogprobs = true, *req.Logprobs
	}
	return a.run(w, r, &req.common, o, "text_completion", "cmpl-")
}

// Usage is OpenAI's usage object, with the prefix cache's saving.
type Usage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	TotalTokens         int `json:"total_tokens"`
	PromptTokensDetails struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

func usageOf(st engine.Stats) Usage {
	u := Usage{PromptTokens: st.PromptTokens, CompletionTokens: st.Tokens, TotalTokens: st.PromptTokens + st.Tokens}
	u.PromptTokensDetails.CachedTokens = st.CachedTokens
	return u
}

// run generates for one request, streamed as server-sent events or as
// one JSON response.
func (a *Server) run(w http.ResponseWriter, r *http.Request, c *common, o engine.Options, object, idPrefix string) *apiError {
	if n := a.inflight.Add(1); n > int64(a.e.Parallel()+a.cfg.MaxQueue) {
		a.inflight.Add(-1)
		w.Header().Set("Retry-After", "1")
		return newError(http.StatusTooManyRequests, "rate_limit_error", "", "rate_limit_exceeded", "the server is busy: %d requests running or queued (tessera serve --parallel, --max-queue)", n-1)
	}
	defer a.inflight.Add(-1)
	if o.MaxTokens == 0 { // max_tokens not given: as many as the context leaves, up to MaxOutput
		o.MaxTokens, o.MaxContext = a.cfg.MaxOutput, a.cfg.Context
	} else if o.MaxPromptTokens = a.cfg.Context - o.MaxTokens; o.MaxPromptTokens < 1 {
		return badRequest("max_tokens", "context_length_exceeded", "max_tokens %d leaves no room for the prompt in this server's context of %d tokens (tessera serve --ctx)", o.MaxTokens, a.cfg.Context)
	}
	var idb [12]byte
	rand.Read(idb[:])
	id := idPrefix + hex.EncodeToString(idb[:])
	created := time.Now().Unix()
	chat := object == "chat.completion"
	rc := http.NewResponseController(w)
	rc.SetWriteDeadline(time.Time{}) // a generation may take longer than the server's write timeout
	if !c.Stream {
		var text strings.Builder
		var lps []engine.Piece
		st, err := a.e.Generate(r.Context(), o, func(p engine.Piece) bool {
			text.WriteString(p.Text)
			if o.Logprobs {
				lps = append(lps, p)
			}
			return true
		})
		if err != nil {
			return a.generateError(err)
		}
		out := text.String() + st.Tail
		if o.Grammar != nil && st.Stopped == "stop" {
			if verr := o.Grammar.Validate([]byte(out)); verr != nil {
				return newError(http.StatusInternalServerError, "server_error", "", "", "the constrained output does not validate: %v", verr)
			}
		}
		choice := map[string]any{"index": 0, "finish_reason": st.FinishReason(), "logprobs": nil}
		if chat {
			choice["message"] = map[string]any{"role": "assistant", "content": out, "refusal": nil}
			if o.Logprobs {
				choice["logprobs"] = chatLogprobs(lps)
			}
		} else {
			choice["text"] = out
			if o.Logprobs {
				choice["logprobs"] = completionLogprobs(lps)
			}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": object, "created": created, "model": a.cfg.ModelID,
			"system_fingerprint": a.fingerprint(), "choices": []any{choice}, "usage": usageOf(st)})
		return nil
	}
	// Server-sent events: nothing is written before the first token, so
	// an error before it is still a plain HTTP error.
	chunkObject := object
	if chat {
		chunkObject = "chat.completion.chunk"
	}
	started := false
	send := func(v any) bool {
		if !started {
			h := w.Header()
			h.Set("Content-Type", "text/event-stream")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
			w.WriteHeader(http.StatusOK)
			started = true
		}
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		return rc.Flush() == nil
	}
	chunk := func(choices []any) map[string]any {
		return map[string]any{"id": id, "object": chunkObject, "created": created, "model": a.cfg.ModelID,
			"system_fingerprint": a.fingerprint(), "choices": choices}
	}
	piece := func(text string, p *engine.Piece, finish any) map[string]any {
		ch := map[string]any{"index": 0, "finish_reason": finish, "logprobs": nil}
		var lp any
		if p != nil && o.Logprobs {
			if chat {
				lp = chatLogprobs([]engine.Piece{*p})
			} else {
				lp = completionLogprobs([]engine.Piece{*p})
			}
			ch["logprobs"] = lp
		}
		if chat {
			delta := map[string]any{}
			if text != "" || p != nil {
				delta["content"] = text
			}
			ch["delta"] = delta
		} else {
			ch["text"] = text
		}
		return chunk([]any{ch})
	}
	first := true
	st, err := a.e.Generate(r.Context(), o, func(p engine.Piece) bool {
		if first && chat {
			first = false
			if !send(chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}})) {
				return false
			}
		}
		if p.Text == "" && !o.Logprobs {
			return true
		}
		return send(piece(p.Text, &p, nil))
	})
	if err != nil {
		aerr := a.generateError(err)
		if !started {
			return aerr
		}
		send(map[string]any{"error": aerr})
		return nil
	}
	if r.Context().Err() != nil {
		return nil // the client went away
	}
	if first && chat {
		send(chunk([]any{map[string]any{"index": 0, "delta": map[string]any{"role": "assistant", "content": ""}, "logprobs": nil, "finish_reason": nil}}))
	}
	if st.Tail != "" {
		send(piece(st.Tail, nil, nil))
	}
	fin := piece("", nil, st.FinishReason())
	send(fin)
	if c.StreamOptions != nil && c.StreamOptions.IncludeUsage {
		u := chunk([]any{})
		u["usage"] = usageOf(st)
		send(u)
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	rc.Flush()
	return nil
}

// generateError maps an engine error to its HTTP status.
func (a *Server) generateError(err error) *apiError {
	switch {
	case errors.Is(err, engine.ErrContext):
		return badRequest("messages", "context_length_exceeded", "%v (this server allows %d tokens of prompt + max_tokens: tessera serve --ctx)", err, a.cfg.Context)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return newError(499, "invalid_request_error", "", "cancelled", "the request was cancelled")
	case errors.Is(err, engine.ErrBadRequest):
		return badRequest("", "invalid_value", "%v", err)
	}
	return newError(http.StatusInternalServerError, "server_error", "", "", "%v", err)
}

// fingerprint names the model and backend a response came from.
func (a *Server) fingerprint() string {
	id := a.e.Identity()
	return "tessera-" + hex.EncodeToString(id[:4])
}

type logprobEntry struct {
	Token       string          `json:"token"`
	Logprob     float32         `json:"logprob"`
	Bytes       []int           `json:"bytes"`
	TopLogprobs []logprobEntry2 `json:"top_logprobs"`
}

type logprobEntry2 struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

func tokenBytes(s string) []int {
	b := make([]int, len(s))
	for i := range len(s) {
		b[i] = int(s[i])
	}
	return b
}

// chatLogprobs is the chat completion's logprobs object.
func chatLogprobs(ps []engine.Piece) map[string]any {
	out := make([]logprobEntry, len(ps))
	for i, p := range ps {
		tok := tokenText(p)
		out[i] = logprobEntry{Token: tok, Logprob: finite(p.Logprob), Bytes: tokenBytes(tok), TopLogprobs: []logprobEntry2{}}
		for _, t := range p.Top {
			out[i].TopLogprobs = append(out[i].TopLogprobs, logprobEntry2{Token: t.Text, Logprob: finite(t.Logprob), Bytes: tokenBytes(t.Text)})
		}
	}
	return map[string]any{"content": out, "refusal": nil}
}

// completionLogprobs is the legacy completion's logprobs object.
func completionLogprobs(ps []engine.Piece) map[string]any {
	var toks []string
	var lps []float32
	var tops []map[string]float32
	var offs []int
	off := 0
	for _, p := range ps {
		tok := tokenText(p)
		toks, lps, offs = append(toks, tok), append(lps, finite(p.Logprob)), append(offs, off)
		off += len(tok)
		m := map[string]float32{}
		for _, t := range p.Top {
			m[t.Text] = finite(t.Logprob)
		}
		tops = append(tops, m)
	}
	return map[string]any{"tokens": toks, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offs}
}

// tokenText is a piece's own token text (the streamed text may hold back
// or join pieces).
func tokenText(p engine.Piece) string {
	if p.TokenText != "" {
		return p.TokenText
	}
	return p.Text
}

// finite maps −Inf (a masked token) to the most negative float32, as JSON
// has no infinities.
func finite(v float32) float32 {
	if math.IsInf(float64(v), -1) {
		return -math.MaxFloat32
	}
	return v
}
