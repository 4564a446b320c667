// Package openaitest runs the official OpenAI Go client against tessera's
// API (kept apart from package api so that fuzzing api does not compile
// the client).
package openaitest_test

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/cmd/tessera/internal/api"
	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

const microModel = "../../../../../models/k3-micro"

// apiServer is `tessera serve --model models/k3-micro`'s API on a
// loopback port with the given settings.
func apiServer(t *testing.T, parallel int, cfg api.Config) *httptest.Server {
	t.Helper()
	e, err := engine.Open(microModel, engine.OpenOptions{Parallel: parallel, PrefixCache: 64 << 20})
	require.NoError(t, err)
	cfg.ModelID = "k3-micro"
	if cfg.MaxBody == 0 {
		cfg.MaxBody = 8 << 20
	}
	if cfg.Context == 0 {
		cfg.Context = 4096
	}
	if cfg.MaxOutput == 0 {
		cfg.MaxOutput = 256
	}
	ts := httptest.NewServer(api.New(e, cfg))
	t.Cleanup(func() { ts.Close(); e.Close() })
	return ts
}

// greedy is the engine's greedy text for a prompt (what `tessera run`
// prints).
func greedy(t *testing.T, prompt string, n int) string {
	t.Helper()
	e, err := engine.Open(microModel, engine.OpenOptions{})
	require.NoError(t, err)
	defer e.Close()
	var b strings.Builder
	st, err := e.Generate(context.Background(), engine.Options{Prompt: prompt, MaxTokens: n}, func(p engine.Piece) bool { b.WriteString(p.Text); return true })
	require.NoError(t, err)
	return b.String() + st.Tail
}

func client(ts *httptest.Server, opts ...option.RequestOption) openai.Client {
	return openai.NewClient(append([]option.RequestOption{option.WithBaseURL(ts.URL + "/v1/"), option.WithAPIKey("unused"), option.WithMaxRetries(0)}, opts...)...)
}

func chatParams(user string, max int64) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: "k3-micro", MaxTokens: openai.Int(max), Seed: openai.Int(1),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are a helpful assistant."), openai.UserMessage(user)}}
}

// The official OpenAI Go client against tessera serve: plain, streamed,
// image, JSON schema and JSON object requests, completions, models,
// logprobs and prefix-cache reuse reported in usage.
func TestOpenAIClient(t *testing.T) {
	ts := apiServer(t, 2, api.Config{MaxQueue: 16})
	c := client(ts)
	ctx := context.Background()

	t.Run("models", func(t *testing.T) {
		l, err := c.Models.List(ctx)
		require.NoError(t, err)
		require.Len(t, l.Data, 1)
		require.Equal(t, "k3-micro", l.Data[0].ID)
	})
	var plain *openai.ChatCompletion
	t.Run("plain", func(t *testing.T) {
		var err error
		plain, err = c.Chat.Completions.New(ctx, chatParams("And God said", 12))
		require.NoError(t, err)
		require.Len(t, plain.Choices, 1)
		require.Equal(t, "assistant", string(plain.Choices[0].Message.Role))
		require.Contains(t, []string{"stop", "length"}, plain.Choices[0].FinishReason)
		require.NotZero(t, plain.Usage.PromptTokens)
		require.Equal(t, plain.Usage.PromptTokens+plain.Usage.CompletionTokens, plain.Usage.TotalTokens)
		require.LessOrEqual(t, plain.Usage.CompletionTokens, int64(12))
	})
	t.Run("logit bias", func(t *testing.T) {
		// +100 on one token makes greedy decoding repeat it (the ban's
		// −∞ is generate's TestLogitBias*)
		tok, err := tokenizer.Load(microModel + "/tokenizer.json")
		require.NoError(t, err)
		want, err := tok.Decode([]int{300, 300, 300, 300})
		require.NoError(t, err)
		p := chatParams("And God said", 4)
		p.Temperature = openai.Float(0)
		p.LogitBias = map[string]int64{"300": 100}
		r, err := c.Chat.Completions.New(ctx, p)
		require.NoError(t, err)
		require.Equal(t, want, r.Choices[0].Message.Content)
	})
	t.Run("streamed equals plain", func(t *testing.T) {
		p := chatParams("And God said", 12)
		p.StreamOptions.IncludeUsage = openai.Bool(true)
		s := c.Chat.Completions.NewStreaming(ctx, p)
		acc := openai.ChatCompletionAccumulator{}
		chunks := 0
		for s.Next() {
			acc.AddChunk(s.Current())
			chunks++
		}
		require.NoError(t, s.Err())
		require.Greater(t, chunks, 2)
		require.Equal(t, plain.Choices[0].Message.Content, acc.Choices[0].Message.Content)
		require.Equal(t, plain.Usage.CompletionTokens, acc.Usage.CompletionTokens)
		// the same prompt again: resumed from the prefix cache
		require.Greater(t, acc.Usage.PromptTokensDetails.CachedTokens, int64(0))
	})
	t.Run("image", func(t *testing.T) {
		img, err := os.ReadFile(microModel + "/eval/scenes/020.png")
		require.NoError(t, err)
		url := "data:image/png;base64," + base64.StdEncoding.EncodeToString(img)
		r, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "k3-micro", MaxTokens: openai.Int(16), Temperature: openai.Float(0),
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}), openai.TextContentPart("Describe the image.")})}})
		require.NoError(t, err)
		require.NotEmpty(t, r.Choices[0].Message.Content)
		require.Greater(t, r.Usage.PromptTokens, int64(20)) // the image's tokens
	})
	schema := map[string]any{"type": "object", "properties": map[string]any{
		"name": map[string]any{"type": "string", "maxLength": 20}, "year": map[string]any{"type": "integer"},
		"colors": map[string]any{"type": "array", "items": map[string]any{"enum": []any{"red", "green", "blue"}}}},
		"required": []any{"name", "year", "colors"}, "additionalProperties": false}
	t.Run("json_schema", func(t *testing.T) {
		raw, _ := json.Marshal(schema)
		g, err := grammar.Schema(raw)
		require.NoError(t, err)
		for seed := int64(1); seed <= 4; seed++ {
			p := chatParams("Describe a painting as JSON.", 48)
			p.Seed = openai.Int(seed)
			p.Temperature = openai.Float(1.2)
			p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONSchema: &openai.ResponseFormatJSONSchemaParam{
				JSONSchema: openai.ResponseFormatJSONSchemaJSONSchemaParam{Name: "painting", Schema: schema, Strict: openai.Bool(true)}}}
			r, err := c.Chat.Completions.New(ctx, p)
			require.NoError(t, err)
			out := r.Choices[0].Message.Content
			require.NoError(t, g.Validate([]byte(out)), "seed %d: %q", seed, out)
			var v struct {
				Name   string   `json:"name"`
				Year   int      `json:"year"`
				Colors []string `json:"colors"`
			}
			require.NoError(t, json.Unmarshal([]byte(out), &v))
		}
	})
	t.Run("json_object streamed", func(t *testing.T) {
		p := chatParams("JSON please.", 40)
		p.Temperature = openai.Float(1)
		p.ResponseFormat = openai.ChatCompletionNewParamsResponseFormatUnion{OfJSONObject: &openai.ResponseFormatJSONObjectParam{}}
		s := c.Chat.Completions.NewStreaming(ctx, p)
		var b strings.Builder
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 {
				b.WriteString(ch.Choices[0].Delta.Content)
			}
		}
		require.NoError(t, s.Err())
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(b.String()), &m), b.String())
	})
	t.Run("logprobs and stop", func(t *testing.T) {
		p := chatParams("And God said", 8)
		p.Logprobs, p.TopLogprobs = openai.Bool(true), openai.Int(3)
		r, err := c.Chat.Completions.New(ctx, p)
		require.NoError(t, err)
		lp := r.Choices[0].Logprobs.Content
		require.Equal(t, int(r.Usage.CompletionTokens), len(lp))
		for _, x := range lp {
			require.LessOrEqual(t, x.Logprob, 0.0)
			require.Len(t, x.TopLogprobs, 3)
			require.GreaterOrEqual(t, x.TopLogprobs[0].Logprob, x.Logprob)
		}
		if text := plain.Choices[0].Message.Content; len(text) > 4 {
			p := chatParams("And God said", 12)
			p.Stop = openai.ChatCompletionNewParamsStopUnion{OfString: openai.String(text[2:4])}
			r, err := c.Chat.Completions.New(ctx, p)
			require.NoError(t, err)
			require.Equal(t, text[:strings.Index(text, text[2:4])], r.Choices[0].Message.Content)
			require.Equal(t, "stop", r.Choices[0].FinishReason)
		}
	})
	t.Run("completions", func(t *testing.T) {
		r, err := c.Completions.New(ctx, openai.CompletionNewParams{Model: "k3-micro", MaxTokens: openai.Int(8), Temperature: openai.Float(0),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}})
		require.NoError(t, err)
		require.Equal(t, greedy(t, "And God said", 8), r.Choices[0].Text)
		s := c.Completions.NewStreaming(ctx, openai.CompletionNewParams{Model: "k3-micro", MaxTokens: openai.Int(8), Temperature: openai.Float(0),
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("And God said")}})
		var b strings.Builder
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 {
				b.WriteString(ch.Choices[0].Text)
			}
		}
		require.NoError(t, s.Err())
		require.Equal(t, r.Choices[0].Text, b.String())
	})
	t.Run("chat turns reuse the cache", func(t *testing.T) {
		p := chatParams("Tell me a story.", 10)
		r1, err := c.Chat.Completions.New(ctx, p)
		require.NoError(t, err)
		p.Messages = append(p.Messages, openai.AssistantMessage(r1.Choices[0].Message.Content), openai.UserMessage("And then?"))
		r2, err := c.Chat.Completions.New(ctx, p)
		require.NoError(t, err)
		require.Greater(t, r2.Usage.PromptTokensDetails.CachedTokens, r1.Usage.PromptTokens-4, "turn 2 usage %+v", r2.Usage)
	})
	t.Run("stats", func(t *testing.T) {
		resp, err := http.Get(ts.URL + "/v1/stats")
		require.NoError(t, err)
		defer resp.Body.Close()
		var v struct {
			Totals engine.Totals `json:"totals"`
		}
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&v))
		require.Greater(t, v.Totals.Cache.Hits, int64(0))
		require.Greater(t, v.Totals.CachedTokens, int64(0))
		require.Greater(t, v.Totals.Requests, int64(5))
	})
	t.Run("8 concurrent", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := c.Chat.Completions.New(ctx, chatParams(fmt.Sprintf("Request %d", i), 8))
				if err == nil && len(r.Choices) != 1 {
					err = errors.New("no choice")
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			require.NoError(t, err)
		}
	})
}

// apiErr asserts an OpenAI-shaped error with status and code.
func apiErr(t *testing.T, err error, status int, code string) {
	t.Helper()
	var e *openai.Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, status, e.StatusCode, e.Message)
	require.Equal(t, code, e.Code, e.Message)
	require.NotEmpty(t, e.Message)
	require.NotEmpty(t, e.Type)
}

// post sends a raw body and decodes the OpenAI error.
func post(t *testing.T, url, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	var v map[string]any
	json.NewDecoder(resp.Body).Decode(&v)
	return resp.StatusCode, v
}

// Bad requests get OpenAI-shaped 4xx errors.
func TestOpenAIErrors(t *testing.T) {
	ts := apiServer(t, 1, api.Config{MaxBody: 64 << 10, Context: 64})
	c := client(ts)
	ctx := context.Background()
	_, err := c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "gpt-9", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hi")}})
	apiErr(t, err, 404, "model_not_found")
	_, err = c.Chat.Completions.New(ctx, chatParams(strings.Repeat("many words here ", 40), 8))
	apiErr(t, err, 400, "context_length_exceeded")
	big := openai.UserMessage(strings.Repeat("x", 100<<10))
	_, err = c.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "k3-micro", Messages: []openai.ChatCompletionMessageParamUnion{big}})
	apiErr(t, err, 413, "request_too_large")
	p := chatParams("hi", 8)
	p.Temperature = openai.Float(7)
	_, err = c.Chat.Completions.New(ctx, p)
	apiErr(t, err, 400, "invalid_value")
	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"model": "k3-micro", "messages": [`, 400, "invalid_json"},
		{`{"model": "k3-micro", "messages": []}`, 400, "missing_required_parameter"},
		{`{"messages": [{"role":"user","content":"hi"}]}`, 400, "missing_required_parameter"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]}`, 400, "invalid_image_url"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}]}`, 400, "invalid_value"},
		{`{"model": "k3-micro", "messages": [{"role":"wizard","content":"hi"}]}`, 400, "invalid_value"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":"hi"}], "frobnicate": 1}`, 400, "unknown_parameter"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":"hi"}], "top_logprobs": 2}`, 400, "invalid_value"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":"hi"}], "logit_bias": {"99999": 5}}`, 400, "invalid_value"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":"hi"}], "logit_bias": {"5": -101}}`, 400, "invalid_value"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":"hi"}], "response_format": {"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"pattern":"x"}}}}}}`, 400, "invalid_value"},
		{`{"model": "k3-micro", "messages": [{"role":"user","content":"hi"}], "max_tokens": 2, "response_format": {"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"abc":{"type":"string"}},"required":["abc"]}}}}`, 400, "invalid_value"},
	} {
		status, v := post(t, ts.URL+"/v1/chat/completions", tc.body)
		e, _ := v["error"].(map[string]any)
		require.Equal(t, tc.status, status, "%s: %v", tc.body, v)
		require.NotNil(t, e, tc.body)
		require.Equal(t, tc.code, e["code"], "%s: %v", tc.body, e)
		require.Equal(t, "invalid_request_error", e["type"])
		require.Contains(t, e, "param")
	}
	resp, err := http.Get(ts.URL + "/v1/chat/completions")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, 405, resp.StatusCode)
}

// A client that goes away mid-stream stops its generation; the server
// keeps serving and its goroutines settle back.
func TestOpenAIDisconnect(t *testing.T) {
	ts := apiServer(t, 1, api.Config{MaxQueue: 4, MaxOutput: 100000, Context: 200000})
	c := client(ts)
	_, err := c.Chat.Completions.New(context.Background(), chatParams("warm up", 2))
	require.NoError(t, err)
	http.DefaultClient.CloseIdleConnections()
	before := runtime.NumGoroutine()
	for range 3 {
		ctx, cancel := context.WithCancel(context.Background())
		body := `{"model":"k3-micro","stream":true,"max_tokens":100000,"seed":1,"messages":[{"role":"user","content":"Go on forever"}]}`
		req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		rd := bufio.NewReader(resp.Body)
		for n := 0; n < 5; { // a few chunks, then hang up
			line, err := rd.ReadString('\n')
			require.NoError(t, err)
			if strings.HasPrefix(line, "data: ") {
				n++
			}
		}
		cancel()
		resp.Body.Close()
	}
	// the next request is served at once (the sequence was given back)
	start := time.Now()
	r, err := c.Chat.Completions.New(context.Background(), chatParams("still there?", 4))
	require.NoError(t, err)
	require.NotEmpty(t, r.Choices)
	require.Less(t, time.Since(start), 20*time.Second)
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	require.LessOrEqual(t, runtime.NumGoroutine(), before+2, "goroutines leaked")
}

// A full queue answers 429; --api-key is enforced.
func TestOpenAIQueueAndKey(t *testing.T) {
	ts := apiServer(t, 1, api.Config{MaxQueue: 0, MaxOutput: 100000, Context: 200000, APIKey: "sekret"})
	status, v := post(t, ts.URL+"/v1/chat/completions", `{"model":"k3-micro","messages":[{"role":"user","content":"hi"}]}`)
	require.Equal(t, 401, status, v)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// seed 1: a long reply (a random seed may end it at once, freeing the sequence)
	body := `{"model":"k3-micro","stream":true,"max_tokens":100000,"seed":1,"messages":[{"role":"user","content":"Go on"}]}`
	req, _ := http.NewRequestWithContext(ctx, "POST", ts.URL+"/v1/chat/completions", strings.NewReader(body))
	req.Header.Set("Authorization", "Bearer sekret")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n') // the first chunk: the sequence is busy
	require.NoError(t, err, line)
	kc := client(ts, option.WithAPIKey("sekret"))
	_, err = kc.Chat.Completions.New(context.Background(), chatParams("hi", 2))
	apiErr(t, err, 429, "rate_limit_exceeded")
	cancel()
}

// Without max_tokens a request may use what the context leaves; with one
// that leaves no room for the prompt it is refused.
func TestOpenAIContextBudget(t *testing.T) {
	ts := apiServer(t, 1, api.Config{Context: 48, MaxOutput: 1000})
	c := client(ts)
	r, err := c.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "k3-micro", Temperature: openai.Float(1), Seed: openai.Int(5),
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("And God said")}})
	require.NoError(t, err)
	require.LessOrEqual(t, r.Usage.TotalTokens, int64(48))
	_, err = c.Chat.Completions.New(context.Background(), chatParams("hi", 48))
	apiErr(t, err, 400, "context_length_exceeded")
}

// Tools, tool calls, tool results and names reach the model's chat
// template (core/chat's request, as in the browser): the prompt the
// server counts is the template's rendering of the request with them.
func TestOpenAITools(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"config.json", "tokenizer.json", "model.safetensors"} {
		abs, err := filepath.Abs(filepath.Join(microModel, f))
		require.NoError(t, err)
		require.NoError(t, os.Symlink(abs, filepath.Join(dir, f)))
	}
	tmpl := `{% for t in tools %}[tool {{ t.function.name }}]{% endfor %}{% for m in messages %}<{{ m.role }}{% if m.name %} {{ m.name }}{% endif %}>` +
		`{{ m.content }}{% for c in m.tool_calls %}[call {{ c.function.name }} {{ c.function.arguments }}]{% endfor %}` +
		`{% if m.tool_call_id %}[for {{ m.tool_call_id }}]{% endif %}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}`
	cfg, err := json.Marshal(map[string]any{"chat_template": tmpl, "eos_token": "<|im_end|>"})
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), cfg, 0o644))
	e, err := engine.Open(dir, engine.OpenOptions{})
	require.NoError(t, err)
	ts := httptest.NewServer(api.New(e, api.Config{ModelID: "k3-micro", MaxBody: 1 << 20, Context: 4096, MaxOutput: 8}))
	t.Cleanup(func() { ts.Close(); e.Close() })

	p := openai.ChatCompletionNewParams{Model: "k3-micro", MaxTokens: openai.Int(2), Temperature: openai.Float(0),
		Tools: []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
			Name: "get_weather", Parameters: shared.FunctionParameters{"type": "object"}})},
		Messages: []openai.ChatCompletionMessageParamUnion{
			{OfUser: &openai.ChatCompletionUserMessageParam{Name: openai.String("ann"),
				Content: openai.ChatCompletionUserMessageParamContentUnion{OfString: openai.String("Weather in Paris?")}}},
			{OfAssistant: &openai.ChatCompletionAssistantMessageParam{ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{
				{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: "c1",
					Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}}},
			openai.ToolMessage("sunny", "c1"),
		}}
	c := client(ts)
	r, err := c.Chat.Completions.New(context.Background(), p)
	require.NoError(t, err)

	body, err := json.Marshal(p)
	require.NoError(t, err)
	req, err := chat.ParseRequest(body)
	require.NoError(t, err)
	rd, err := chat.ForModel(dir)
	require.NoError(t, err)
	text, err := rd.Render(req.Input())
	require.NoError(t, err)
	for _, s := range []string{"[tool get_weather]", "<user ann>Weather in Paris?", `[call get_weather {"city":"Paris"}]`, "<tool>sunny[for c1]"} {
		require.Contains(t, text, s)
	}
	ids, err := e.Codec().Encode(text)
	require.NoError(t, err)
	require.Equal(t, int64(len(ids)), r.Usage.PromptTokens, "the prompt is the template's rendering of %s", text)
}
