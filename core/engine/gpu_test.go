//go:build cgo && !js

package engine

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/native"
)

// openMicroGPU opens k3-micro on the native GPU (lavapipe on CI machines
// without one), skipping without an adapter.
func openMicroGPU(t *testing.T, cache int64) *Engine {
	return openMicroGPUWith(t, OpenOptions{PrefixCache: cache})
}

// openMicroGPUWith is openMicroGPU with more options.
func openMicroGPUWith(t *testing.T, o OpenOptions) *Engine {
	t.Helper()
	d, err := native.OpenQuiet()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no GPU adapter (lavapipe: scripts/setup.sh gpu): %v", err)
		}
		t.Skipf("no GPU adapter: %v", err)
	}
	d.Close()
	o.Backend, o.MaxContext, o.Quiet = "gpu", 512, true
	e, err := Open(microDir, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	if e.GPU == nil {
		t.Fatalf("backend %s", e.Backend)
	}
	return e
}

// On the GPU too, chat turns resume from the prefix cache (snapshots read
// back from the device) with the logits of a cold run, and a constrained
// request (sampled on the host) validates.
func TestPrefixCacheGPU(t *testing.T) {
	warm, cold := openMicroGPU(t, 64<<20), openMicroGPU(t, 0)
	msgs := []Message{{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "And God said"}}
	for n := 1; n <= 2; n++ {
		reply, wl, ws := turn(t, warm, msgs, 8)
		_, cl, _ := turn(t, cold, msgs, 8)
		t.Logf("turn %d: %d cached, logits differ by %g", n, ws.CachedTokens, maxDiff(wl, cl))
		if d := maxDiff(wl, cl); d > 1e-5 {
			t.Fatalf("turn %d: logits differ from a cold run by %g", n, d)
		}
		if n > 1 && ws.CachedTokens == 0 {
			t.Fatalf("turn %d did not resume: %+v", n, ws)
		}
		msgs = append(msgs, Message{Role: "assistant", Content: reply}, Message{Role: "user", Content: "More."})
	}
	g := grammar.JSONObject()
	var out strings.Builder
	st, err := warm.Generate(context.Background(), Options{Prompt: "JSON:", MaxTokens: 24, Grammar: g,
		Sampler: generate.SamplerOptions{Temperature: 1, Seed: 7}}, func(p Piece) bool { out.WriteString(p.Text); return true })
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Validate([]byte(out.String() + st.Tail)); err != nil {
		t.Fatalf("%q: %v", out.String(), err)
	}
}
