//go:build cgo && !js

package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
)

// greedy generates n tokens greedily from prompt and returns them with
// the stats (and whether the engine was on the GPU at the first token).
func greedy(t *testing.T, e *Engine, prompt string, n int) ([]int, Stats, bool, error) {
	t.Helper()
	var ids []int
	onGPU := false
	st, err := e.Generate(context.Background(), Options{Prompt: prompt, MaxTokens: n}, func(p Piece) bool {
		if len(ids) == 0 {
			onGPU = e.GPU != nil
		}
		ids = append(ids, p.ID)
		return true
	})
	return ids, st, onGPU, err
}

// With a GPU budget of 25 % of k3-micro's experts, and with its experts
// computed on the CPU, the engine generates the all-resident engine's
// tokens and reports its expert cache.
func TestExpertStreamingEngine(t *testing.T) {
	full := openMicroGPU(t, 0)
	small := openMicroGPUWith(t, OpenOptions{GPUMemory: "25%"})
	want, ws, _, err := greedy(t, full, "And God said", 12)
	if err != nil {
		t.Fatal(err)
	}
	got, gs, _, err := greedy(t, small, "And God said", 12)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("25%% of the experts: %v, resident %v", got, want)
	}
	x := gs.ExpertCache
	if ws.ExpertCache != nil || x == nil || x.Slots != 16 || x.Experts != 64 || x.Misses == 0 || x.HitRate <= 0 || x.HitRate >= 1 ||
		x.UploadBytesPerToken <= 0 || x.UploadBytes == 0 {
		t.Fatalf("expert cache stats: resident %+v, streamed %+v", ws.ExpertCache, x)
	}
	if tot := small.Totals().ExpertCache; tot == nil || tot.Misses < x.Misses {
		t.Fatalf("totals %+v", tot)
	}
	// the decode steps alone: 12 steps of one token (every emitted token
	// is fed back, the last too), each looking up its top-k experts at
	// every MoE layer
	moe := small.Cfg.NumHiddenLayers - small.Cfg.FirstKDenseReplace
	if d := gs.DecodeExpertCache; ws.DecodeExpertCache != nil || d == nil || d.Hits+d.Misses != int64(12*small.Cfg.TopK*moe) ||
		d.Misses > x.Misses || d.UploadBytes > x.UploadBytes || d.Slots != 16 || d.Tokens != 12 {
		t.Fatalf("decode expert cache stats: resident %+v, streamed %+v (whole generation %+v)", ws.DecodeExpertCache, d, x)
	}
	t.Logf("25%%: %+v", *x)
	// the live view shows the cache's hit rate while streaming
	lv := NewLiveView(small.Cfg, 16, 64)
	if _, err := small.Generate(context.Background(), Options{Prompt: "And God said", MaxTokens: 4, Live: lv}, func(Piece) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if c := lv.View().ExpertCache; c == nil || c.HitRate <= 0 || c.HitRate > 1 || c.BytesPerToken < 0 {
		t.Fatalf("live view expert cache %+v", c)
	}
	// --n-cpu-moe over every MoE layer: the same tokens, the CPU's share reported
	cpuMoE := openMicroGPUWith(t, OpenOptions{CPUMoELayers: 99})
	got, cs, _, err := greedy(t, cpuMoE, "And God said", 12)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("experts on the CPU: %v, resident %v", got, want)
	}
	if c := cs.ExpertCache; c == nil || c.CPULayers != cpuMoE.Cfg.NumHiddenLayers-cpuMoE.Cfg.FirstKDenseReplace || c.CPUMs <= 0 {
		t.Fatalf("experts on the CPU: stats %+v", c)
	}
	checkGPUMemoryInfo(t, full, small, cpuMoE)
}

// checkGPUMemoryInfo checks Info().GPUMemory of k3-micro all resident,
// with 16 of 64 experts per layer resident, and with every MoE layer's
// experts on the CPU: the buffers hold the weights and state and at most
// the estimated scratch besides, and the resident
// weights are the model's less exactly the experts left on the host.
func checkGPUMemoryInfo(t *testing.T, full, small, cpuMoE *Engine) {
	t.Helper()
	moe := full.Cfg.NumHiddenLayers - full.Cfg.FirstKDenseReplace
	for _, c := range []struct {
		name      string
		e         *Engine
		offExpert int // experts per MoE layer not on the GPU
	}{{"resident", full, 0}, {"25%", small, 64 - 16}, {"experts on the CPU", cpuMoE, 64}} {
		u := c.e.Info().GPUMemory
		if u == nil {
			t.Fatalf("%s: Info().GPUMemory is nil on the GPU", c.name)
		}
		// the weights are counted exactly, the scratch estimated from above
		if rest := u.Bytes - u.Weights - u.State; u.ExpertBytes <= 0 || u.Context != 512 || rest <= 0 || rest > u.Scratch {
			t.Errorf("%s: GPU memory %+v: buffers beyond weights and state %d, want in (0, scratch]", c.name, *u, rest)
		}
		if c.offExpert < 64 && (u.Experts != 64 || u.ExpertSlots != 64-c.offExpert) {
			t.Errorf("%s: %d of %d experts resident, want %d of 64", c.name, u.ExpertSlots, u.Experts, 64-c.offExpert)
		}
		if want := u.ModelWeights - int64(c.offExpert*moe)*u.ExpertBytes; u.Weights != want {
			t.Errorf("%s: resident weights %d, want the model's %d less %d experts of %d bytes in each of %d layers = %d",
				c.name, u.Weights, u.ModelWeights, c.offExpert, u.ExpertBytes, moe, want)
		}
		t.Logf("%s: GPU memory %+v", c.name, *u)
	}
	if f, s := full.Info().GPUMemory, small.Info().GPUMemory; f.ModelWeights != s.ModelWeights || s.Bytes >= f.Bytes {
		t.Errorf("model weights %d resident, %d streamed; buffers %d resident, %d streamed", f.ModelWeights, s.ModelWeights, f.Bytes, s.Bytes)
	}
}

// A failed expert upload mid-generation (an injected device out of
// memory) fails the step with an error naming it; with CPUFallback
// (backend auto) the generation goes on on the CPU from the tokens so far
// and gives the CPU's greedy tokens.
func TestGPUFailureFallsBackToCPU(t *testing.T) {
	var armed atomic.Bool
	var calls atomic.Int64
	fault := errors.New("out of memory (injected)")
	uploadFault = func(layer, expert int) error {
		if armed.Load() && calls.Add(1) > 8 {
			return fault
		}
		return nil
	}
	defer func() { uploadFault = nil }()
	cpu := openMicro(t, 0)
	want, _, _, err := greedy(t, cpu, "And God said", 16)
	if err != nil {
		t.Fatal(err)
	}

	strict := openMicroGPUWith(t, OpenOptions{GPUMemory: "25%"})
	armed.Store(true)
	if _, _, _, err := greedy(t, strict, "And God said", 16); !errors.Is(err, fault) || !strings.Contains(err.Error(), "upload of") {
		t.Fatalf("without fallback: %v", err)
	}

	armed.Store(false)
	calls.Store(0)
	e := openMicroGPUWith(t, OpenOptions{GPUMemory: "25%"})
	e.CPUFallback = true
	var got []int
	onGPU := false
	st, err := e.Generate(context.Background(), Options{Prompt: "And God said", MaxTokens: 16}, func(p Piece) bool {
		if len(got) == 0 { // the fault strikes a few tokens into the generation
			onGPU = e.GPU != nil
			armed.Store(true)
		}
		got = append(got, p.ID)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !onGPU || e.GPU != nil || !strings.HasPrefix(st.Backend, "cpu; the GPU failed mid-generation") {
		t.Fatalf("first token on the GPU %v, GPU now %v, backend %q", onGPU, e.GPU != nil, st.Backend)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the fallback: %v, CPU %v", got, want)
	}
	t.Log(st.Backend)
}
