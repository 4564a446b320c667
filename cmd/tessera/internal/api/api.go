// Package api serves OpenAI's HTTP API — chat completions, completions,
// models — on a tessera engine, for `tessera serve`: requests decoded with
// limits, generations scheduled on the engine's sequences with a bounded
// queue, streamed as server-sent events, errors in OpenAI's shape.
package api

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
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

// newError is an OpenAI-shaped error with status.
func newError(status int, typ, param, code, format string, args ...any) *chat.Error {
	return &chat.Error{Status: status, Type: typ, Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, e *chat.Error) {
	writeJSON(w, e.Status, e)
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
		h      func(http.ResponseWriter, *http.Request) *chat.Error
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

func (a *Server) models(w http.ResponseWriter, _ *http.Request) *chat.Error {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{a.modelObject()}})
	return nil
}

func (a *Server) model(w http.ResponseWriter, _ *http.Request) *chat.Error {
	writeJSON(w, http.StatusOK, a.modelObject())
	return nil
}

// stats reports the engine's totals: requests, tokens, prefix-cache hits
// and prefill tokens saved.
func (a *Server) stats(w http.ResponseWriter, _ *http.Request) *chat.Error {
	writeJSON(w, http.StatusOK, map[string]any{"backend": a.e.Backend, "parallel": a.e.Parallel(), "inflight": a.inflight.Load(),
		"goroutines": runtime.NumGoroutine(), "totals": a.e.Totals()})
	return nil
}

// read reads a JSON request body of at most MaxBody bytes.
func (a *Server) read(w http.ResponseWriter, r *http.Request) ([]byte, *chat.Error) {
	if ct := r.Header.Get("Content-Type"); ct != "" && !strings.HasPrefix(ct, "application/json") {
		return nil, newError(http.StatusUnsupportedMediaType, "invalid_request_error", "", "unsupported_media_type", "Content-Type %q: send application/json", ct)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, a.cfg.MaxBody))
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return nil, newError(http.StatusRequestEntityTooLarge, "invalid_request_error", "", "request_too_large", "the request body is larger than %d bytes (tessera serve --max-body)", a.cfg.MaxBody)
		}
		return nil, chat.Invalid("", "invalid_json", "reading the request body: %v", err)
	}
	return b, nil
}

// check applies the server's rules to the fields both completion requests
// share (chat.Sampling, already checked): the model must be this server's,
// and maxTokens (0: not given) within MaxOutput.
func (a *Server) check(s *chat.Sampling, maxTokens int) *chat.Error {
	if s.Model == "" {
		return chat.Invalid("model", "missing_required_parameter", "model is required (this server serves %q)", a.cfg.ModelID)
	}
	if s.Model != a.cfg.ModelID {
		return newError(http.StatusNotFound, "invalid_request_error", "model", "model_not_found", "the model %q does not exist (this server serves %q)", s.Model, a.cfg.ModelID)
	}
	if maxTokens > a.cfg.MaxOutput {
		return chat.Invalid("max_tokens", "invalid_value", "max_tokens must be in [1, %d], got %d", a.cfg.MaxOutput, maxTokens)
	}
	return nil
}

// images decodes the image parts of the messages, in order: data: URLs
// only.
func images(msgs []chat.Message) ([]engine.Image, *chat.Error) {
	var out []engine.Image
	for i, m := range msgs {
		for j, p := range m.Content.Parts {
			if !p.IsImage() {
				continue
			}
			param := fmt.Sprintf("messages[%d].content[%d].image_url", i, j)
			if p.ImageURL == nil {
				return nil, chat.Invalid(param, "missing_required_parameter", "%s: an image part needs image_url.url (a data: URL)", param)
			}
			data, err := dataURL(p.ImageURL.URL)
			if err != nil {
				return nil, chat.Invalid(param, "invalid_image_url", "%s: %v", param, err)
			}
			out = append(out, engine.Image{Data: data})
		}
	}
	return out, nil
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

func (a *Server) chat(w http.ResponseWriter, r *http.Request) *chat.Error {
	body, aerr := a.read(w, r)
	if aerr != nil {
		return aerr
	}
	req, err := chat.ParseRequest(body)
	if err != nil {
		return chat.AsError(err)
	}
	if aerr := a.check(&req.Sampling, req.MaxNewTokens(0)); aerr != nil {
		return aerr
	}
	o, err := engine.ChatOptions(req, 0) // no max_tokens: run gives the room the context leaves
	if err != nil {
		return chat.AsError(err)
	}
	if o.Images, aerr = images(req.Messages); aerr != nil {
		return aerr
	}
	return a.run(w, r, &req.Sampling, o, "chat.completion", "chatcmpl-")
}

// completionRequest is a POST /v1/completions body.
type completionRequest struct {
	chat.Sampling
	Prompt   json.RawMessage `json:"prompt"`
	Logprobs *int            `json:"logprobs"`
	Echo     bool            `json:"echo"`
	Suffix   *string         `json:"suffix"`
}

func (a *Server) completions(w http.ResponseWriter, r *http.Request) *chat.Error {
	body, aerr := a.read(w, r)
	if aerr != nil {
		return aerr
	}
	var req completionRequest
	if err := chat.Decode(body, &req); err != nil {
		return chat.AsError(err)
	}
	if err := req.Check(); err != nil {
		return chat.AsError(err)
	}
	maxTokens := req.MaxNewTokens(16) // OpenAI's default for completions
	if aerr := a.check(&req.Sampling, maxTokens); aerr != nil {
		return aerr
	}
	if req.Echo || (req.Suffix != nil && *req.Suffix != "") {
		return chat.Invalid("echo", "unsupported_parameter", "echo and suffix are not supported")
	}
	o := engine.Options{Stop: req.Stop, Sampler: req.SamplerOptions(), MaxTokens: maxTokens}
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
		return chat.Invalid("prompt", "invalid_value", "prompt must be a string, a list of one string, or a list of token ids")
	}
	if o.Prompt == "" && len(o.Tokens) == 0 {
		return chat.Invalid("prompt", "invalid_value", "the prompt is empty")
	}
	if req.Logprobs != nil {
		if *req.Logprobs < 0 || *req.Logprobs > 5 {
			return chat.Invalid("logprobs", "invalid_value", "logprobs must be in [0, 5]")
		}
		o.Logprobs, o.TopLogprobs = true, *req.Logprobs
	}
	return a.run(w, r, &req.Sampling, o, "text_completion", "cmpl-")
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
func (a *Server) run(w http.ResponseWriter, r *http.Request, c *chat.Sampling, o engine.Options, object, idPrefix string) *chat.Error {
	if n := a.inflight.Add(1); n > int64(a.e.Parallel()+a.cfg.MaxQueue) {
		a.inflight.Add(-1)
		w.Header().Set("Retry-After", "1")
		return newError(http.StatusTooManyRequests, "rate_limit_error", "", "rate_limit_exceeded", "the server is busy: %d requests running or queued (tessera serve --parallel, --max-queue)", n-1)
	}
	defer a.inflight.Add(-1)
	if o.MaxTokens == 0 { // max_tokens not given: as many as the context leaves, up to MaxOutput
		o.MaxTokens, o.MaxContext = a.cfg.MaxOutput, a.cfg.Context
	} else if o.MaxPromptTokens = a.cfg.Context - o.MaxTokens; o.MaxPromptTokens < 1 {
		return chat.Invalid("max_tokens", "context_length_exceeded", "max_tokens %d leaves no room for the prompt in this server's context of %d tokens (tessera serve --ctx)", o.MaxTokens, a.cfg.Context)
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
		send(aerr)
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
func (a *Server) generateError(err error) *chat.Error {
	return engine.APIError(err, fmt.Sprintf("this server allows %d tokens of prompt + max_tokens: tessera serve --ctx", a.cfg.Context))
}

// fingerprint names the model and backend a response came from.
func (a *Server) fingerprint() string {
	id := a.e.Identity()
	return "tessera-" + hex.EncodeToString(id[:4])
}

// chatLogprobs is the chat completion's logprobs object.
func chatLogprobs(ps []engine.Piece) map[string]any {
	out := make([]chat.TokenLogprob, len(ps))
	for i, p := range ps {
		out[i] = p.ChatLogprob()
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
		tok, lp, top := p.CompletionLogprob()
		toks, lps, tops, offs = append(toks, tok), append(lps, lp), append(tops, top), append(offs, off)
		off += len(tok)
	}
	return map[string]any{"tokens": toks, "token_logprobs": lps, "top_logprobs": tops, "text_offset": offs}
}
