package main

import (
	"bytes"
	"encoding/json"
	"net/http/httptest"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/cmd/tessera/internal/api"
	"github.com/tessera-llm/tessera/core/engine"
)

const microModel = "../../models/k3-micro"

// The page's server answers /v1/ with the API when a model is loaded, and
// with an OpenAI-shaped 404 when none is; the static routes stay as they
// were.
func TestServeMountsAPI(t *testing.T) {
	e, err := engine.Open(microModel, engine.OpenOptions{})
	require.NoError(t, err)
	defer e.Close()
	s, err := newServer(serveConfig{ModelDir: microModel, Loopback: true, API: api.New(e, api.Config{ModelID: "k3-micro", MaxBody: 1 << 20, Context: 256, MaxOutput: 8})})
	require.NoError(t, err)
	defer s.Close()
	w := get(s, "/v1/models")
	require.Equal(t, 200, w.Code, w.Body.String())
	require.Contains(t, w.Body.String(), `"k3-micro"`)
	require.Equal(t, 200, get(s, "/model/config.json").Code)
	r := httptest.NewRequest("GET", "/v1/models", nil)
	r.Host = "evil.example:8080"
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	require.Equal(t, 421, w.Code) // DNS rebinding is refused before the API

	bare, err := newServer(serveConfig{Loopback: true})
	require.NoError(t, err)
	defer bare.Close()
	w = get(bare, "/v1/models")
	require.Equal(t, 404, w.Code)
	var v struct {
		Error struct{ Code string } `json:"error"`
	}
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &v))
	require.Equal(t, "no_model", v.Error.Code)
}

// Non-loopback addresses need an API key.
func TestServeNeedsKeyBeyondLoopback(t *testing.T) {
	var out, errb bytes.Buffer
	code := runMain([]string{"serve", "--addr", "0.0.0.0:0", "--model", microModel}, &out, &errb)
	require.Equal(t, 1, code)
	require.Contains(t, errb.String(), "--api-key")
}

// bench-serve runs end to end and reports the prefix cache's share.
func TestBenchServe(t *testing.T) {
	js := t.TempDir() + "/serve.json"
	code, out, errs := tessera(t, "bench-serve", "--model", microModel, "--concurrency", "1,2", "--requests", "2", "--max-tokens", "2",
		"--system-words", "60", "--parallel", "2", "--json", js)
	require.Zero(t, code, errs)
	require.Contains(t, out, "TTFT p50 ms")
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	var rows []serveBenchRow
	require.NoError(t, json.Unmarshal(b, &rows))
	require.Len(t, rows, 4)
	for _, r := range rows {
		require.Greater(t, r.ReqPerS, 0.0)
		if r.PrefixCache {
			require.Greater(t, r.CachedShare, 0.3, "%+v", r)
		} else {
			require.Zero(t, r.CachedShare)
		}
	}
}
