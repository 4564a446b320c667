package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tessera-llm/tessera/core/generate"
)

// Request is an OpenAI chat-completion request, as the browser's
// engine.chat.completions.create takes it. Besides OpenAI's fields it
// accepts the extensions vLLM and llama.cpp accept: top_k, min_p,
// repetition_penalty and chat_template_kwargs (extra template variables,
// e.g. {"enable_thinking": false}). Fields tessera does not implement are
// accepted at their neutral values only, so a request is never silently
// served differently than asked.
type Request struct {
	Model               string            `json:"model,omitempty"` // any name: the loaded model answers
	Messages            []Message         `json:"messages"`
	Tools               []json.RawMessage `json:"tools,omitempty"`
	ToolChoice          json.RawMessage   `json:"tool_choice,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	Seed                *int64            `json:"seed,omitempty"`
	Stop                Stop              `json:"stop,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *StreamOptions    `json:"stream_options,omitempty"`
	N                   *int              `json:"n,omitempty"`
	User                string            `json:"user,omitempty"`
	TopK                *int              `json:"top_k,omitempty"`
	MinP                *float64          `json:"min_p,omitempty"`
	RepetitionPenalty   *float64          `json:"repetition_penalty,omitempty"`
	ChatTemplateKwargs  map[string]any    `json:"chat_template_kwargs,omitempty"`
	// Accepted at their neutral values only.
	FrequencyPenalty *float64        `json:"frequency_penalty,omitempty"`
	PresencePenalty  *float64        `json:"presence_penalty,omitempty"`
	Logprobs         *bool           `json:"logprobs,omitempty"`
	ResponseFormat   json.RawMessage `json:"response_format,omitempty"`
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
// ("invalid_request_error", "server_error"), the offending parameter and
// a code. Its JSON form is {"error": {"message", "type", "param", "code"}}.
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

// invalid is a 400 invalid_request_error about param.
func invalid(param, format string, args ...any) *Error {
	return &Error{Status: 400, Type: "invalid_request_error", Param: param, Message: fmt.Sprintf(format, args...)}
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

// ParseRequest reads and checks a chat-completion request; its errors are
// *Error values naming the parameter.
func ParseRequest(body []byte) (*Request, error) {
	var r Request
	d := json.NewDecoder(bytes.NewReader(body))
	d.DisallowUnknownFields()
	if err := d.Decode(&r); err != nil {
		msg := err.Error()
		if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
			f = strings.Trim(f, `"`)
			return nil, invalid(f, "Unrecognized request argument supplied: %s", f)
		}
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, invalid(te.Field, "Invalid type for '%s': expected %s, got %s", te.Field, te.Type, te.Value)
		}
		return nil, invalid("", "We could not parse the JSON body of your request: %s", msg)
	}
	if d.More() {
		return nil, invalid("", "We could not parse the JSON body of your request: data after the JSON object")
	}
	return &r, r.Check()
}

// Check validates the request.
func (r *Request) Check() error {
	if len(r.Messages) == 0 {
		return invalid("messages", "[] is too short - 'messages'")
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		switch m.Role {
		case "system", "user", "assistant", "tool":
		case "developer": // OpenAI's newer name for system; templates know "system"
			m.Role = "system"
		case "":
			return invalid(fmt.Sprintf("messages[%d].role", i), "Missing required parameter: 'messages[%d].role'.", i)
		default:
			return invalid(fmt.Sprintf("messages[%d].role", i), "Invalid value: '%s'. Supported values are: 'system', 'developer', 'user', 'assistant' and 'tool'.", m.Role)
		}
	}
	for _, p := range []struct {
		name string
		v    *int
	}{{"max_tokens", r.MaxTokens}, {"max_completion_tokens", r.MaxCompletionTokens}} {
		if p.v != nil && *p.v < 1 {
			return invalid(p.name, "Invalid '%s': integer below minimum value. Expected a value >= 1, but got %d instead.", p.name, *p.v)
		}
	}
	if t := r.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 2) {
		return invalid("temperature", "Invalid 'temperature': expected a value between 0 and 2, got %g.", *t)
	}
	if p := r.TopP; p != nil && (math.IsNaN(*p) || *p <= 0 || *p > 1) {
		return invalid("top_p", "Invalid 'top_p': expected a value in (0, 1], got %g.", *p)
	}
	if r.Seed != nil && *r.Seed < 0 {
		return invalid("seed", "Invalid 'seed': expected a non-negative integer, got %d.", *r.Seed)
	}
	if r.TopK != nil && *r.TopK < 0 {
		return invalid("top_k", "Invalid 'top_k': expected a non-negative integer, got %d.", *r.TopK)
	}
	if p := r.MinP; p != nil && (math.IsNaN(*p) || *p < 0 || *p > 1) {
		return invalid("min_p", "Invalid 'min_p': expected a value between 0 and 1, got %g.", *p)
	}
	if p := r.RepetitionPenalty; p != nil && (math.IsNaN(*p) || *p <= 0) {
		return invalid("repetition_penalty", "Invalid 'repetition_penalty': expected a value > 0, got %g.", *p)
	}
	if len(r.Stop) > 4 {
		return invalid("stop", "Invalid 'stop': at most 4 stop sequences, got %d.", len(r.Stop))
	}
	for _, s := range r.Stop {
		if s == "" {
			return invalid("stop", "Invalid 'stop': empty stop sequence.")
		}
	}
	if r.N != nil && *r.N != 1 {
		return invalid("n", "Invalid 'n': tessera generates one choice per request (n=1), got %d.", *r.N)
	}
	if r.StreamOptions != nil && !r.Stream {
		return invalid("stream_options", "The 'stream_options' parameter is only allowed when 'stream' is enabled.")
	}
	for _, p := range []struct {
		name string
		v    *float64
	}{{"frequency_penalty", r.FrequencyPenalty}, {"presence_penalty", r.PresencePenalty}} {
		if p.v != nil && *p.v != 0 {
			return invalid(p.name, "'%s' is not supported by tessera (use repetition_penalty); only 0 is accepted.", p.name)
		}
	}
	if r.Logprobs != nil && *r.Logprobs {
		return invalid("logprobs", "'logprobs' is not supported here.")
	}
	if len(r.ResponseFormat) > 0 && !bytes.Equal(bytes.TrimSpace(r.ResponseFormat), []byte("null")) {
		var rf struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(r.ResponseFormat, &rf) != nil || rf.Type != "text" {
			return invalid("response_format", "Only response_format {\"type\": \"text\"} is supported here.")
		}
	}
	for k := range r.ChatTemplateKwargs {
		switch k {
		case "messages", "tools", "add_generation_prompt":
			return invalid("chat_template_kwargs", "chat_template_kwargs may not set %q.", k)
		}
	}
	return nil
}

// MaxNewTokens is max_completion_tokens, else max_tokens, else def.
func (r *Request) MaxNewTokens(def int) int {
	switch {
	case r.MaxCompletionTokens != nil:
		return *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		return *r.MaxTokens
	}
	return def
}

// SamplerOptions are the request's sampling options with OpenAI's
// defaults (temperature 1, top_p 1); without a seed, a random one (as
// OpenAI samples differently on every call).
func (r *Request) SamplerOptions() generate.SamplerOptions {
	o := generate.SamplerOptions{Temperature: 1, TopP: 1}
	if r.Temperature != nil {
		o.Temperature = float32(*r.Temperature)
	}
	if r.TopP != nil {
		o.TopP = float32(*r.TopP)
	}
	if r.TopK != nil {
		o.TopK = *r.TopK
	}
	if r.MinP != nil {
		o.MinP = float32(*r.MinP)
	}
	if r.RepetitionPenalty != nil {
		o.RepetitionPenalty = float32(*r.RepetitionPenalty)
	}
	if r.Seed != nil {
		o.Seed = uint64(*r.Seed)
	} else {
		o.Seed = rand.Uint64()
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
