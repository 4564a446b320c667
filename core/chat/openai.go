package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
)

// Sampling are the request fields OpenAI's chat completions and (legacy)
// completions share: the model, the output's length, sampling, stop
// sequences and streaming. Besides OpenAI's fields it accepts the
// extensions vLLM and llama.cpp accept: top_k, min_p and
// repetition_penalty. Fields tessera does not implement are accepted at
// their neutral values only, so a request is never silently served
// differently than asked.
type Sampling struct {
	Model             string         `json:"model,omitempty"`
	MaxTokens         *int           `json:"max_tokens,omitempty"`
	Temperature       *float64       `json:"temperature,omitempty"`
	TopP              *float64       `json:"top_p,omitempty"`
	Seed              *int64         `json:"seed,omitempty"`
	Stop              Stop           `json:"stop,omitempty"`
	Stream            bool           `json:"stream,omitempty"`
	StreamOptions     *StreamOptions `json:"stream_options,omitempty"`
	N                 *int           `json:"n,omitempty"`
	User              string         `json:"user,omitempty"`
	TopK              *int           `json:"top_k,omitempty"`
	MinP              *float64       `json:"min_p,omitempty"`
	RepetitionPenalty *float64       `json:"repetition_penalty,omitempty"`
	// LogitBias maps token ids (as strings) to a bias in [−100, 100]
	// added to their logits; −100 bans the token.
	LogitBias map[string]float64 `json:"logit_bias,omitempty"`
	// Accepted at their neutral values only.
	FrequencyPenalty *float64 `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64 `json:"presence_penalty,omitempty"`
	// Accepted and ignored: bookkeeping that does not change what is
	// generated (a local server stores nothing and has one tier).
	Store       *bool             `json:"store,omitempty"`
	Metadata    map[string]string `json:"metadata,omitempty"`
	ServiceTier string            `json:"service_tier,omitempty"`
}

// Request is an OpenAI chat-completion request, as tessera serve's
// /v1/chat/completions and the browser's engine.chat.completions.create
// take it: the Sampling fields, the messages, tools and tool_choice
// (passed to the chat template), log-probabilities, a response format
// (JSON, or JSON matching a schema) and chat_template_kwargs (extra
// template variables, e.g. {"enable_thinking": false}).
type Request struct {
	Sampling
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs,omitempty"`
	Logprobs            bool              `json:"logprobs,omitempty"`
	TopLogprobs         *int              `json:"top_logprobs,omitempty"`
	ResponseFormat      *ResponseFormat   `json:"response_format,omitempty"`
	// ParallelToolCalls is accepted and ignored: the model emits the tool
	// calls its template lets it, parsed by the caller.
	ParallelToolCalls *bool `json:"parallel_tool_calls,omitempty"`

	grammar *grammar.Grammar // response_format's, compiled once by Grammar
}

// ResponseFormat is OpenAI's response_format: "text", "json_object" (any
// JSON object) or "json_schema" (JSON matching JSONSchema.Schema).
type ResponseFormat struct {
	Type       string      `json:"type"`
	JSONSchema *JSONSchema `json:"json_schema,omitempty"`
}

// JSONSchema is response_format.json_schema.
type JSONSchema struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// StreamOptions are OpenAI's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// Stop is OpenAI's stop: a string or up to four strings.
type Stop []string

// UnmarshalJSON reads a string, an array of strings or null.
func (s *Stop) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case bytes.Equal(b, []byte("null")):
		*s = nil
		return nil
	case len(b) > 0 && b[0] == '"':
		var one string
		if err := json.Unmarshal(b, &one); err != nil {
			return err
		}
		*s = Stop{one}
		return nil
	}
	var list []string
	if err := json.Unmarshal(b, &list); err != nil {
		return errors.New("stop must be a string or an array of strings")
	}
	*s = list
	return nil
}

// Error is an error in OpenAI's shape: HTTP status, message, type
// ("invalid_request_error", "server_error", …), the offending parameter
// and a code. Its JSON form is {"error": {"message", "type", "param",
// "code"}}.
type Error struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
}

func (e *Error) Error() string { return e.Message }

// MarshalJSON writes OpenAI's error body.
func (e *Error) MarshalJSON() ([]byte, error) {
	type body struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	}
	b := body{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		b.Param = &e.Param
	}
	if e.Code != "" {
		b.Code = &e.Code
	}
	return json.Marshal(struct {
		Error body `json:"error"`
	}{b})
}

// Invalid is a 400 invalid_request_error about param with code (e.g.
// "invalid_value", "missing_required_parameter").
func Invalid(param, code, format string, args ...any) *Error {
	return &Error{Status: 400, Type: "invalid_request_error", Param: param, Code: code, Message: fmt.Sprintf(format, args...)}
}

// AsError returns err as an OpenAI error: itself when it is one, else a
// server_error (500) with its message.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Status: 500, Type: "server_error", Message: err.Error()}
}

// Decode reads one JSON request body into v (a Request, or a request type
// that embeds Sampling), refusing fields v does not have, as OpenAI does;
// its errors are *Error values naming the parameter.
func Decode(body []byte, v any) error {
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			return Invalid(f, "unknown_parameter", "Unrecognized request argument supplied: %s", f)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			f := strings.TrimPrefix(te.Field, "Sampling.") // the embedded struct's Go name
			return Invalid(f, "invalid_type", "Invalid type for '%s': expected %s, got %s", f, te.Type, te.Value)
		}
		return Invalid("", "invalid_json", "We could not parse the JSON body of your request: %s", msg)
	}
	if d.More() {
		return Invalid("", "invalid_json", "We could not parse the JSON body of your request: data after the JSON object")
	}
	return nil
}

// ParseRequest reads and checks a chat-completion request; its errors are
// *Error values naming the parameter.
func ParseRequest(body []byte) (*Request, error) {
	var r Request
	if err := Decode(body, &r); err != nil {
		return nil, err
	}
	return &r, r.Check()
}

// Check validates the shared fields.
func (s *Sampling) Check() error {
	if s.MaxTokens != nil && *s.MaxTokens < 1 {
		return Invalid("max_tokens", "invalid_value", "Invalid 'max_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", *s.MaxTokens)
	}
	if t := s.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return Invalid("temperature", "invalid_value", "Invalid 'temperature': expected a value between 0 and 2, got %g.", *t)
	}
	if p := s.TopP; p != nil && (math.IsNaN(*p) || *p <= 0 || *p > 1) {
		return Invalid("top_p", "invalid_value", "Invalid 'top_p': expected a value in (0, 1], got %g.", *p)
	}
	if s.TopK != nil && *s.TopK < 0 {
		return Invalid("top_k", "invalid_value", "Invalid 'top_k': expected a non-negative integer, got %d.", *s.TopK)
	}
	if p := s.MinP; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
		return Invalid("min_p", "invalid_value", "Invalid 'min_p': expected a value between 0 and 1, got %g.", *p)
	}
	if p := s.RepetitionPenalty; p != nil && (math.IsNaN(*p) || *p <= 0) {
		return Invalid("repetition_penalty", "invalid_value", "Invalid 'repetition_penalty': expected a value > 0, got %g.", *p)
	}
	if len(s.Stop) > 4 {
		return Invalid("stop", "invalid_value", "Invalid 'stop': at most 4 stop sequences, got %d.", len(s.Stop))
	}
	for _, x := range s.Stop {
		if x == "" {
			return Invalid("stop", "invalid_value", "Invalid 'stop': empty stop sequence.")
		}
	}
	if s.N != nil && *s.N != 1 {
		return Invalid("n", "unsupported_value", "Invalid 'n': tessera generates one choice per request (n=1), got %d.", *s.N)
	}
	if s.StreamOptions != nil && !s.Stream {
		return Invalid("stream_options", "invalid_value", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	for _, p := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", s.FrequencyPenalty}, {"presence_penalty", s.PresencePenalty}} {
		if p.v != nil && *p.v != 0 {
			return Invalid(p.name, "unsupported_value", "'%s' is not supported by tessera (use repetition_penalty); only 0 is accepted.", p.name)
		}
	}
	for k, v := range s.LogitBias {
		if id, err := strconv.Atoi(k); err != nil || id < 0 {
			return Invalid("logit_bias", "invalid_value", "Invalid 'logit_bias': keys must be token ids (non-negative integers), got %q.", k)
		}
		if math.IsNaN(v) || v < generate.BanBias || v > -generate.BanBias {
			return Invalid("logit_bias", "invalid_value", "Invalid 'logit_bias' of token %s: expected a value between %d and %d, got %g.", k, generate.BanBias, -generate.BanBias, v)
		}
	}
	return nil
}

// Check validates the request.
func (r *Request) Check() error {
	if len(r.Messages) == 0 {
		return Invalid("messages", "missing_required_parameter", "[] is too short - 'messages'")
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		param := fmt.Sprintf("messages[%d]", i)
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system; templates know "system"
			m.Role = "system"
		case "":
			return Invalid(param+".role", "missing_required_parameter", "Missing required parameter: '%s.role'.", param)
		default:
			return Invalid(param+".role", "invalid_value", "Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'.", m.Role)
		}
		for j, p := range m.Content.Parts {
			if p.IsImage() && m.Role != "user" {
				return Invalid(fmt.Sprintf("%s.content[%d]", param, j), "invalid_value", "%s.content[%d]: images go in user messages.", param, j)
			}
		}
	}
	if err := r.Sampling.Check(); err != nil {
		return err
	}
	if r.MaxCompletionTokens != nil && *r.MaxCompletionTokens < 1 {
		return Invalid("max_completion_tokens", "invalid_value", "Invalid 'max_completion_tokens': integer below minimum value. Expected a value >= 1, but got %d instead.", *r.MaxCompletionTokens)
	}
	if k := r.TopLogprobs; k != nil && (*k < 0 || *k > 20 || !r.Logprobs) {
		return Invalid("top_logprobs", "invalid_value", "Invalid 'top_logprobs': expected a value in [0, 20] with 'logprobs': true, got %d.", *k)
	}
	if _, err := r.Grammar(); err != nil {
		return err
	}
	for k := range r.ChatTemplateKwargs {
		switch k {
		case "messages", "tools", "add_generation_prompt":
			return Invalid("chat_template_kwargs", "invalid_value", "chat_template_kwargs may not set %q.", k)
		}
	}
	return nil
}

// Grammar is the grammar response_format asks for: nil for text (or none),
// any JSON object for json_object, JSON matching the schema for
// json_schema. Its errors are *Error values.
func (r *Request) Grammar() (*grammar.Grammar, error) {
	f := r.ResponseFormat
	if f == nil {
		return nil, nil
	}
	if r.grammar != nil {
		return r.grammar, nil
	}
	switch f.Type {
	case "text":
		return nil, nil
	case "json_object":
		return grammar.JSONObject(), nil
	case "json_schema":
		if f.JSONSchema == nil || len(f.JSONSchema.Schema) == 0 {
			return nil, Invalid("response_format.json_schema", "missing_required_parameter", "response_format json_schema needs json_schema.schema.")
		}
		g, err := grammar.Schema(f.JSONSchema.Schema)
		if err != nil {
			return nil, Invalid("response_format.json_schema.schema", "invalid_value", "%v", err)
		}
		r.grammar = g
		return g, nil
	}
	return nil, Invalid("response_format.type", "invalid_value", "Invalid 'response_format.type': '%s'. Supported values are: 'text', 'json_object' and 'json_schema'.", f.Type)
}

// MaxNewTokens is max_completion_tokens, else max_tokens, else def.
func (r *Request) MaxNewTokens(def int) int {
	if r.MaxCompletionTokens != nil {
		return *r.MaxCompletionTokens
	}
	return r.Sampling.MaxNewTokens(def)
}

// MaxNewTokens is max_tokens, else def.
func (s *Sampling) MaxNewTokens(def int) int {
	if s.MaxTokens != nil {
		return *s.MaxTokens
	}
	return def
}

// SamplerOptions are the request's sampling options with OpenAI's
// defaults (temperature 1, top_p 1); without a seed, a random one (as
// OpenAI samples differently on every call).
func (s *Sampling) SamplerOptions() generate.SamplerOptions {
	o := generate.SamplerOptions{Temperature: 1, TopP: 1}
	if s.Temperature != nil {
		o.Temperature = float32(*s.Temperature)
	}
	if s.TopP != nil {
		o.TopP = float32(*s.TopP)
	}
	if s.TopK != nil {
		o.TopK = *s.TopK
	}
	if s.MinP != nil {
		o.MinP = float32(*s.MinP)
	}
	if s.RepetitionPenalty != nil {
		o.RepetitionPenalty = float32(*s.RepetitionPenalty)
	}
	if s.Seed != nil {
		o.Seed = uint64(*s.Seed)
	} else {
		o.Seed = rand.Uint64()
	}
	for k, v := range s.LogitBias { // keys checked by Check
		id, _ := strconv.Atoi(k)
		o.LogitBias = append(o.LogitBias, generate.TokenBias{ID: id, Bias: float32(v)})
	}
	return o
}

// Input is the template input of the request: its messages and tools,
// add_generation_prompt on, chat_template_kwargs and tool_choice (when
// given as a string) as template variables.
func (r *Request) Input() Input {
	in := Input{Messages: r.Messages, Tools: r.Tools, AddGenerationPrompt: true, Vars: map[string]any{}}
	for k, v := range r.ChatTemplateKwargs {
		in.Vars[k] = v
	}
	var choice string
	if json.Unmarshal(r.ToolChoice, &choice) == nil && choice != "" {
		in.Vars["tool_choice"] = choice
	}
	return in
}

// Stopper finds OpenAI stop sequences in streamed text. It holds back
// text that may be the start of a stop sequence, so what it releases is
// never part of one.
type Stopper struct {
	stops []string
	held  string
}

// NewStopper returns a Stopper for the given sequences (none: it passes
// text through).
func NewStopper(stops []string) *Stopper { return &Stopper{stops: stops} }

// Push adds generated text. It returns the text that can be shown, and
// stop = true when a stop sequence is complete: the text returned then
// ends right before it, and generation should end.
func (s *Stopper) Push(text string) (emit string, stop bool) {
	if len(s.stops) == 0 {
		return text, false
	}
	buf := s.held + text
	cut := -1
	for _, st := range s.stops {
		if i := strings.Index(buf, st); i >= 0 && (cut < 0 || i < cut) {
			cut = i
		}
	}
	if cut >= 0 {
		s.held = ""
		return buf[:cut], true
	}
	keep := 0 // the longest suffix of buf that begins a stop sequence
	for _, st := range s.stops {
		for n := min(len(st)-1, len(buf)); n > keep; n-- {
			if strings.HasSuffix(buf, st[:n]) {
				keep = n
				break
			}
		}
	}
	s.held = buf[len(buf)-keep:]
	return buf[:len(buf)-keep], false
}

// Flush returns the text held back at the end of generation.
func (s *Stopper) Flush() string {
	h := s.held
	s.held = ""
	return h
}

// TokenLogprob is one token of a chat completion's logprobs.content: its
// text, log-probability and bytes, and the most likely alternatives.
type TokenLogprob struct {
	Token       string       `json:"token"`
	Logprob     float32      `json:"logprob"`
	Bytes       []int        `json:"bytes"`
	TopLogprobs []TopLogprob `json:"top_logprobs"`
}

// TopLogprob is one alternative of a TokenLogprob.
type TopLogprob struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}
