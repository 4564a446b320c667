//go:build cgo && !js

package engine

import (
	"context"
	"math"
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
)

// openMicroGPU opens k3-micro on the native GPU (lavapipe on CI machines
// without one), skipping without an adapter.
func openMicroGPU(t *testing.T, cache int64) *Engine {
	return openMicroGPUWith(t, OpenOptions{PrefixCache: cache})
}

// openMicroGPUWith is openMicroGPU with more options.
func openMicroGPUWith(t *testing.T, o OpenOptions) *Engine {
	t.Helper()
	d := nativeOrSkip(t)
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
	msgs := []chat.Message{{Role: "system", Content: chat.Text("You are a helpful assistant.")}, {Role: "user", Content: chat.Text("And God said")}}
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
		msgs = append(msgs, chat.Message{Role: "assistant", Content: chat.Text(reply)}, chat.Message{Role: "user", Content: chat.Text("More.")})
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

// The live routing/state view works on the GPU backend: the same greedy
// generation fills it as on the CPU (routing loads equal, KDA norms within
// float error, every step recorded with its backend).
func TestLiveViewGPU(t *testing.T) {
	gpu, cpu := openMicroGPU(t, 0), openMicro(t, 0)
	views := map[string]LiveSnapshot{}
	for name, e := range map[string]*Engine{"CPU": cpu, "WebGPU": gpu} {
		v := NewLiveView(e.Cfg, 64, 100)
		if _, err := e.Generate(context.Background(), Options{Prompt: "And God said", MaxTokens: 12, Live: v, NoCache: true},
			func(Piece) bool { return true }); err != nil {
			t.Fatal(err)
		}
		views[name] = v.View()
	}
	c, g := views["CPU"], views["WebGPU"]
	if !g.HasMoE || !g.HasData || g.Tokens != c.Tokens || len(g.Steps) != len(c.Steps) || len(g.Steps) != 12 {
		t.Fatalf("GPU view: moe %v data %v tokens %d steps %d; CPU tokens %d steps %d", g.HasMoE, g.HasData, g.Tokens, len(g.Steps), c.Tokens, len(c.Steps))
	}
	for i := range c.Load {
		if g.Load[i] != c.Load[i] {
			t.Fatalf("expert load %d: GPU %v, CPU %v", i, g.Load[i], c.Load[i])
		}
	}
	kda := 0
	for i, cn := range c.Last.KDANorm {
		gn := g.Last.KDANorm[i]
		if math.IsNaN(cn) != math.IsNaN(gn) || (!math.IsNaN(cn) && math.Abs(gn-cn) > 1e-3*cn) {
			t.Fatalf("layer %d KDA norm: GPU %v, CPU %v", i, gn, cn)
		}
		if !math.IsNaN(cn) {
			kda++
		}
	}
	if kda == 0 || g.Last.Backend != "WebGPU" || c.Last.Backend != "CPU" || g.Last.CacheTokens != c.Last.CacheTokens || g.Last.StateBytes == 0 {
		t.Errorf("last step: GPU %+v, CPU %+v", g.Last, c.Last)
	}
}

// A generation decoded on the GPU reports its decode step's dispatches in
// one queue submission (Stats.DispatchesPerToken, SubmitsPerToken): the
// runner's count, with fewer dispatches when the repeating fusions are
// on; one that never decoded (a single token) reports none.
func TestGPUStatsDispatches(t *testing.T) {
	e := openMicroGPU(t, 0)
	gen := func(n int) Stats {
		t.Helper()
		st, err := e.Generate(context.Background(), Options{Prompt: "And God said", MaxTokens: n}, func(Piece) bool { return true })
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
	counts := map[bool]int{}
	for _, on := range []bool{false, true} {
		restore := e.Dev.SetRepeatFusions(on, 0)
		st := gen(4)
		restore()
		if st.Tokens != 4 || st.SubmitsPerToken != 1 || st.DispatchesPerToken != e.GPU.Stats().Dispatches || st.DispatchesPerToken < e.Cfg.NumHiddenLayers {
			t.Fatalf("repeating fusions %v: %+v, runner %+v; want one submission of the runner's dispatches", on, st, e.GPU.Stats())
		}
		counts[on] = st.DispatchesPerToken
	}
	if counts[true] >= counts[false] {
		t.Errorf("dispatches per token: %d with the repeating fusions, %d without", counts[true], counts[false])
	}
	t.Logf("k3-micro decode: %d dispatches per token (%d with the repeating fusions)", counts[false], counts[true])
	if st := gen(1); st.DispatchesPerToken != 0 || st.SubmitsPerToken != 0 {
		t.Errorf("one token (no decode step): %+v", st)
	}
}

// gpuVisionEngine loads a vision model as the browser's GPU path does
// (LoadDeferred, the weights uploaded to a GPU runner), on its own device.
func gpuVisionEngine(t *testing.T, open safetensors.Opener) *Engine {
	t.Helper()
	d := nativeOrSkip(t)
	e, err := LoadDeferred(open)
	if err != nil {
		d.Close()
		t.Fatal(err)
	}
	r, err := wgsl.NewRunner(d, e.Model, wgsl.RunnerOptions{MaxChunk: 64, MaxContext: 512})
	if err != nil {
		d.Close()
		e.Close()
		t.Fatal(err)
	}
	e.attachGPU(d, r)
	t.Cleanup(func() { e.Close() })
	return e
}

// On the GPU too the vision tower is read, and the GPU tower built, on
// the first image: uploading the text model and a text-only generation
// read no vision tensor byte; the first image reads them and gives the
// ids of a GPU tower built from a tower bound eagerly; a second image
// reads nothing.
func TestVisionReadOnFirstImageGPU(t *testing.T) {
	files := visionFiles(t)
	open, rec := recordedOpener(files)
	e := gpuVisionEngine(t, open)
	_, err := e.Generate(context.Background(), Options{Prompt: "Hello", MaxTokens: 4}, func(Piece) bool { return true })
	require.NoError(t, err)
	b, n := visionBytes(e.ck, rec)
	require.Zero(t, b, "the GPU upload and a text-only generation read %d bytes of %d vision tensors", b, n)

	eager := gpuVisionEngine(t, safetensors.MemOpener(files))
	tw, err := vision.Load(eager.Model.VisionCfg, eager.ck)
	require.NoError(t, err)
	gt, err := wgsl.NewVisionTower(eager.Dev, tw, 0)
	require.NoError(t, err)
	defer gt.Close()
	eager.NewEncoder = func(*model.Model) (generate.Encoder, func(), error) { return gt, nil, nil }

	img := testRGBA(64, 48)
	im := Image{Width: 64, Height: 48, RGBA: img.Pix}
	require.Equal(t, imageRun(t, eager, im), imageRun(t, e, im), "first image: lazy and eager GPU towers differ")
	_, n = visionBytes(e.ck, rec)
	require.Equal(t, len(vision.Spec(e.Model.VisionCfg)), n, "the first image read %d of the vision tensors", n)
	reads := len(rec.Ranges())
	img2 := testRGBA(30, 90)
	im2 := Image{Width: 30, Height: 90, RGBA: img2.Pix}
	require.Equal(t, imageRun(t, eager, im2), imageRun(t, e, im2), "second image")
	require.Len(t, rec.Ranges(), reads, "the second image read the checkpoint")
}

// nativeOrSkip opens the native GPU device (lavapipe on CI machines
// without a GPU), skipping without an adapter (failing under CI=true).
func nativeOrSkip(t *testing.T) *wgsl.Device {
	t.Helper()
	d, err := native.OpenQuiet()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no GPU adapter (lavapipe: scripts/setup.sh gpu): %v", err)
		}
		t.Skipf("no GPU adapter: %v", err)
	}
	return d
}
