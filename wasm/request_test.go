//go:build js && wasm

package main

import (
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/generate"
)

// generate's request takes logitBias as {tokenId: bias}; a wrong shape is
// an error naming it (the ids and biases are checked by the engine).
func TestParseRequestLogitBias(t *testing.T) {
	parse := func(s string) js.Value { return js.Global().Get("JSON").Call("parse", s) }
	o, err := parseRequest(parse(`{"prompt": "hi", "logitBias": {"5": -100, "7": 2.5}}`))
	require.NoError(t, err)
	assert.ElementsMatch(t, []generate.TokenBias{{ID: 5, Bias: generate.BanBias}, {ID: 7, Bias: 2.5}}, o.Sampler.LogitBias)
	o, err = parseRequest(parse(`{"prompt": "hi"}`))
	require.NoError(t, err)
	assert.Empty(t, o.Sampler.LogitBias)
	for body, want := range map[string]string{
		`{"prompt": "hi", "logitBias": [[5, -100]]}`: "logitBias must be an object {tokenId: bias}",
		`{"prompt": "hi", "logitBias": 3}`:           "logitBias must be an object",
		`{"prompt": "hi", "logitBias": {"x": 1}}`:    `logitBias key "x" is not a token id`,
		`{"prompt": "hi", "logitBias": {"5": "no"}}`: "logitBias[5] must be a number, got string",
	} {
		_, err := parseRequest(parse(body))
		assert.ErrorContains(t, err, want, body)
	}
}
