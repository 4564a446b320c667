//go:build js && wasm

package main

import (
	"encoding/json"
	"syscall/js"
	"testing"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// chatHost is a host with the bundled k3-micro loaded, as the worker's
// load leaves it.
func chatHost(t *testing.T) *host {
	t.Helper()
	e, err := engine.Load(safetensors.DirOpener("../models/k3-micro"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return &host{eng: e}
}

// delta is one onEvent("delta", text, tokenId, logprob) call.
type delta struct {
	text    string
	logprob js.Value
}

// runChat runs one chat request as chatCompletion does, collecting the
// deltas.
func runChat(t *testing.T, h *host, body string) (*chatResult, []delta, error) {
	t.Helper()
	var ds []delta
	on := js.FuncOf(func(_ js.Value, args []js.Value) any {
		if args[0].String() == "delta" {
			ds = append(ds, delta{args[1].String(), args[3]})
		}
		return nil
	})
	defer on.Release()
	res, err := h.runChat(js.ValueOf(body), js.Undefined(), on.Value)
	return res, ds, err
}

// The browser's chat API takes logprobs / top_logprobs and response_format
// (json_object, json_schema) as tessera serve's API does: every token's
// entry in the result and in its delta, and constrained JSON that
// validates.
func TestChatLogprobsAndResponseFormat(t *testing.T) {
	h := chatHost(t)
	const msgs = `"messages": [{"role": "user", "content": "And God said"}]`

	res, ds, err := runChat(t, h, `{`+msgs+`, "max_tokens": 6, "temperature": 0, "logprobs": true, "top_logprobs": 2}`)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Logprobs) != res.CompletionTokens || res.CompletionTokens == 0 {
		t.Fatalf("%d logprobs for %d tokens", len(res.Logprobs), res.CompletionTokens)
	}
	for i, lp := range res.Logprobs {
		if len(lp.TopLogprobs) != 2 || lp.Logprob > 0 || lp.TopLogprobs[0].Logprob < lp.Logprob {
			t.Fatalf("token %d: %+v", i, lp)
		}
	}
	if len(ds) != res.CompletionTokens {
		t.Fatalf("%d deltas for %d tokens", len(ds), res.CompletionTokens)
	}
	for i, d := range ds {
		if d.logprob.Type() != js.TypeObject || d.logprob.Get("token").String() != res.Logprobs[i].Token {
			t.Fatalf("delta %d carries logprob %v, want token %q", i, d.logprob, res.Logprobs[i].Token)
		}
	}
	_, ds, err = runChat(t, h, `{`+msgs+`, "max_tokens": 4, "temperature": 0}`)
	if err != nil {
		t.Fatal(err)
	}
	for i, d := range ds {
		if !d.logprob.IsNull() {
			t.Fatalf("delta %d carries a logprob without logprobs: true", i)
		}
	}

	schema := `{"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}}, "required": ["name", "n"]}`
	g, err := grammar.Schema([]byte(schema))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		format string
		g      *grammar.Grammar
	}{{`{"type": "json_object"}`, grammar.JSONObject()}, {`{"type": "json_schema", "json_schema": {"name": "x", "schema": ` + schema + `}}`, g}} {
		res, _, err := runChat(t, h, `{`+msgs+`, "max_tokens": 40, "temperature": 1, "seed": 3, "response_format": `+tc.format+`}`)
		if err != nil {
			t.Fatal(err)
		}
		if err := tc.g.Validate([]byte(res.Content)); err != nil || res.FinishReason != "stop" {
			t.Fatalf("%s: %q (%s): %v", tc.format, res.Content, res.FinishReason, err)
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(res.Content), &m); err != nil {
			t.Fatalf("%s: not an object: %q", tc.format, res.Content)
		}
	}

	for body, param := range map[string]string{
		`{` + msgs + `, "top_logprobs": 2}`:                                           "top_logprobs",
		`{` + msgs + `, "response_format": {"type": "json_schema"}}`:                  "response_format.json_schema",
		`{` + msgs + `, "response_format": {"type": "yaml"}}`:                         "response_format.type",
		`{` + msgs + `, "max_tokens": 1, "response_format": {"type": "json_object"}}`: "",
	} {
		_, _, err := runChat(t, h, body)
		if e := chat.AsError(err); err == nil || e.Status != 400 || e.Param != param {
			t.Errorf("%s: %v (param %q), want a 400 about %q", body, err, e.Param, param)
		}
	}
}
