package chat

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

func TestParseRequest(t *testing.T) {
	r, err := ParseRequest([]byte(`{"model": "k3", "messages": [{"role": "developer", "content": "Be brief."},
		{"role": "user", "content": [{"type": "text", "text": "Hi"}, {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA=="}}]}],
		"max_tokens": 8, "temperature": 0, "seed": 3, "stop": "END", "stream": true, "stream_options": {"include_usage": true},
		"tool_choice": "none", "chat_template_kwargs": {"enable_thinking": false}}`))
	require.NoError(t, err)
	assert.Equal(t, "system", r.Messages[0].Role, "developer is system")
	assert.Equal(t, 8, r.MaxNewTokens(128))
	assert.Equal(t, Stop{"END"}, r.Stop)
	assert.Len(t, Images(r.Messages), 1)
	in := r.Input()
	assert.True(t, in.AddGenerationPrompt)
	assert.Equal(t, map[string]any{"enable_thinking": false, "tool_choice": "none"}, in.Vars)

	// logit_bias: token ids to biases
	r, err = ParseRequest([]byte(`{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"42": -100, "7": 2.5}}`))
	require.NoError(t, err)
	assert.ElementsMatch(t, []generate.TokenBias{{ID: 7, Bias: 2.5}, {ID: 42, Bias: generate.BanBias}}, r.SamplerOptions().LogitBias)

	// Bookkeeping fields common clients send are accepted.
	_, err = ParseRequest([]byte(`{"messages": [{"role": "user", "content": "x"}], "store": false, "metadata": {"a": "b"},
		"service_tier": "auto", "parallel_tool_calls": true, "logit_bias": {}, "user": "u"}`))
	require.NoError(t, err)

	for _, tc := range []struct{ body, param, code, msg string }{
		{`{"messages": []}`, "messages", "missing_required_parameter", "too short"},
		{`{"messages": [{"role": "user", "content": "x"}], "foo": 1}`, "foo", "unknown_parameter", "Unrecognized request argument supplied: foo"},
		{`{"messages": [{"role": "robot", "content": "x"}]}`, "messages[0].role", "invalid_value", "Invalid value: 'robot'"},
		{`{"messages": [{"content": "x"}]}`, "messages[0].role", "missing_required_parameter", "Missing required parameter"},
		{`{"messages": [{"role": "assistant", "content": [{"type": "image_url", "image_url": {"url": "data:,"}}]}]}`, "messages[0].content[0]", "invalid_value", "images go in user messages"},
		{`{"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}`, "max_tokens", "invalid_value", "minimum value"},
		{`{"messages": [{"role": "user", "content": "x"}], "max_completion_tokens": 0}`, "max_completion_tokens", "invalid_value", "minimum value"},
		{`{"messages": [{"role": "user", "content": "x"}], "temperature": 3}`, "temperature", "invalid_value", "between 0 and 2"},
		{`{"messages": [{"role": "user", "content": "x"}], "top_p": 0}`, "top_p", "invalid_value", "(0, 1]"},
		{`{"messages": [{"role": "user", "content": "x"}], "n": 2}`, "n", "unsupported_value", "n=1"},
		{`{"messages": [{"role": "user", "content": "x"}], "stop": ["a","b","c","d","e"]}`, "stop", "invalid_value", "at most 4"},
		{`{"messages": [{"role": "user", "content": "x"}], "stream_options": {"include_usage": true}}`, "stream_options", "invalid_value", "only allowed when 'stream'"},
		{`{"messages": [{"role": "user", "content": "x"}], "presence_penalty": 1}`, "presence_penalty", "unsupported_value", "not supported"},
		{`{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"x": 5}}`, "logit_bias", "invalid_value", `keys must be token ids (non-negative integers), got "x"`},
		{`{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"-3": 5}}`, "logit_bias", "invalid_value", "token ids"},
		{`{"messages": [{"role": "user", "content": "x"}], "logit_bias": {"42": 101}}`, "logit_bias", "invalid_value", "of token 42: expected a value between -100 and 100, got 101"},
		{`{"messages": [{"role": "user", "content": "x"}], "top_logprobs": 2}`, "top_logprobs", "invalid_value", "'logprobs': true"},
		{`{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 21}`, "top_logprobs", "invalid_value", "[0, 20]"},
		{`{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "xml"}}`, "response_format.type", "invalid_value", "Supported values"},
		{`{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema"}}`, "response_format.json_schema", "missing_required_parameter", "needs json_schema.schema"},
		{`{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "wat"}}}}`, "response_format.json_schema.schema", "invalid_value", "wat"},
		{`{"messages": [{"role": "user", "content": "x"}], "max_tokens": "many"}`, "max_tokens", "invalid_type", "Invalid type"},
		{`{"messages": [`, "", "invalid_json", "could not parse"},
		{`{"messages": [{"role": "user", "content": 5}]}`, "", "invalid_json", "content must be"},
	} {
		_, err := ParseRequest([]byte(tc.body))
		var e *Error
		require.ErrorAs(t, err, &e, tc.body)
		assert.Equal(t, 400, e.Status, tc.body)
		assert.Equal(t, "invalid_request_error", e.Type, tc.body)
		assert.Equal(t, tc.param, e.Param, tc.body)
		assert.Equal(t, tc.code, e.Code, tc.body)
		assert.Contains(t, e.Message, tc.msg, tc.body)
	}
	// logprobs, top_logprobs and response formats are taken
	for _, body := range []string{`{"messages": [{"role": "user", "content": "x"}], "logprobs": true, "top_logprobs": 3}`,
		`{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_object"}}`,
		`{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "p", "strict": true, "schema": {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}}}}`} {
		r, err := ParseRequest([]byte(body))
		require.NoError(t, err, body)
		g, err := r.Grammar()
		require.NoError(t, err)
		assert.Equal(t, r.ResponseFormat != nil, g != nil, body)
		if strings.Contains(body, "json_schema") {
			g2, _ := r.Grammar()
			assert.Same(t, g, g2, "the schema is compiled once (by ParseRequest's check)")
		}
	}
	b, err := json.Marshal(Invalid("n", "unsupported_value", "bad n"))
	require.NoError(t, err)
	assert.JSONEq(t, `{"error": {"message": "bad n", "type": "invalid_request_error", "param": "n", "code": "unsupported_value"}}`, string(b))
	b, err = json.Marshal(&Error{Status: 500, Type: "server_error", Message: "x"})
	require.NoError(t, err)
	assert.JSONEq(t, `{"error": {"message": "x", "type": "server_error", "param": null, "code": null}}`, string(b))
	assert.Equal(t, 500, AsError(assert.AnError).Status)
}

// TestStopper: text is released as soon as it cannot begin a stop
// sequence; a stop sequence split across pieces is found and cut.
func TestStopper(t *testing.T) {
	for _, tc := range []struct {
		stops  []string
		pieces []string
		out    string
		stop   bool
	}{
		{nil, []string{"a", "b"}, "ab", false},
		{[]string{"END"}, []string{"hello E", "N", "D more"}, "hello ", true},
		{[]string{"END"}, []string{"hello E", "ND", "x"}, "hello ", true},
		{[]string{"END"}, []string{"E", "NO"}, "ENO", false},
		{[]string{"ab", "b"}, []string{"xa", "b"}, "x", true},
		{[]string{"\n\n"}, []string{"one\n", "two\n", "\nthree"}, "one\ntwo", true},
	} {
		s := NewStopper(tc.stops)
		var b strings.Builder
		stopped := false
		for _, p := range tc.pieces {
			e, st := s.Push(p)
			b.WriteString(e)
			if st {
				stopped = true
				break
			}
		}
		if !stopped {
			b.WriteString(s.Flush())
		}
		assert.Equal(t, tc.out, b.String(), "%q", tc.pieces)
		assert.Equal(t, tc.stop, stopped, "%q", tc.pieces)
	}
	// Held text is not released early.
	s := NewStopper([]string{"STOP"})
	e, _ := s.Push("go ST")
	assert.Equal(t, "go ", e)
}

func TestSamplerOptions(t *testing.T) {
	r, err := ParseRequest([]byte(`{"messages": [{"role": "user", "content": "x"}]}`))
	require.NoError(t, err)
	o := r.SamplerOptions()
	assert.Equal(t, float32(1), o.Temperature, "OpenAI's default temperature")
	assert.Equal(t, float32(1), o.TopP)
	assert.NotEqual(t, o.Seed, r.SamplerOptions().Seed, "a random seed per call without one")
	r, err = ParseRequest([]byte(`{"messages": [{"role": "user", "content": "x"}], "temperature": 0.5, "top_p": 0.9, "seed": 7,
		"top_k": 40, "min_p": 0.05, "repetition_penalty": 1.1}`))
	require.NoError(t, err)
	o = r.SamplerOptions()
	assert.Equal(t, generate.SamplerOptions{Temperature: 0.5, TopP: 0.9, Seed: 7, TopK: 40, MinP: 0.05, RepetitionPenalty: 1.1}, o)
	require.NoError(t, o.Validate())
}

// fakeCodec knows a few special tokens.
type fakeCodec struct{ tokenizer.Codec }

func (fakeCodec) TokenID(s string) (int, bool) {
	id, ok := map[string]int{"<|im_end|>": 9, "</s>": 2}[s]
	return id, ok
}

func TestStopTokens(t *testing.T) {
	assert.Equal(t, []int{2, 9}, Builtin().StopTokens(fakeCodec{}, []int{2}))
	r, err := FromSource("x", map[string]string{"eos_token": "</s>"})
	require.NoError(t, err)
	assert.Equal(t, []int{7, 2, 9}, r.StopTokens(fakeCodec{}, []int{7}))
	assert.Equal(t, []int{2, 9}, r.StopTokens(fakeCodec{}, []int{2}), "no duplicates")
}
