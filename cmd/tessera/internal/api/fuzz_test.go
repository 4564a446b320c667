package api

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/core/engine"
)

var (
	fuzzAPIOnce sync.Once
	fuzzAPI     *Server
	fuzzAPIErr  error
)

// Any request body gets a well-formed answer: 200 with choices (or an
// event stream), or an OpenAI-shaped 4xx error; never a 5xx or a panic.
func FuzzAPIRequest(f *testing.F) {
	for _, s := range []string{
		`{"model":"k3-micro","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"k3-micro","stream":true,"messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":"x"}]}],"stop":["a","b"]}`,
		`{"model":"k3-micro","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x","schema":{"type":"object","properties":{"a":{"enum":[1,"b"]}},"required":["a"]}}},"max_tokens":8}`,
		`{"model":"k3-micro","messages":[{"role":"user","content":"hi"}],"logprobs":true,"top_logprobs":2,"temperature":0.5,"top_p":0.9,"seed":3}`,
		`{"model":"k3-micro","prompt":[1,2,3],"logprobs":2}`,
		`{"model":"k3-micro","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0KGgo="}}]}]}`,
	} {
		f.Add(s, strings.Contains(s, "prompt"))
	}
	f.Fuzz(func(t *testing.T, body string, completions bool) {
		fuzzAPIOnce.Do(func() {
			var e *engine.Engine
			if e, fuzzAPIErr = engine.Open("../../../../models/k3-micro", engine.OpenOptions{PrefixCache: 8 << 20}); fuzzAPIErr == nil {
				fuzzAPI = New(e, Config{ModelID: "k3-micro", MaxBody: 1 << 16, MaxQueue: 4, Context: 256, MaxOutput: 8})
			}
		})
		if fuzzAPIErr != nil {
			t.Fatal(fuzzAPIErr)
		}
		path := "/v1/chat/completions"
		if completions {
			path = "/v1/completions"
		}
		r := httptest.NewRequest("POST", path, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		w := httptest.NewRecorder()
		fuzzAPI.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%s: status %d: %s", body, w.Code, w.Body.String())
		}
		if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
			if !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") && !strings.Contains(w.Body.String(), `"error"`) {
				t.Fatalf("%s: stream without [DONE]: %q", body, w.Body.String())
			}
			return
		}
		var v struct {
			Choices []json.RawMessage `json:"choices"`
			Error   *struct {
				Message string `json:"message"`
				Type    string `json:"type"`
			} `json:"error"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
			t.Fatalf("%s: status %d, body not JSON: %q", body, w.Code, w.Body.String())
		}
		if (w.Code == 200) != (len(v.Choices) == 1) || (w.Code != 200) != (v.Error != nil && v.Error.Message != "" && v.Error.Type != "") {
			t.Fatalf("%s: status %d: %s", body, w.Code, w.Body.String())
		}
	})
}
