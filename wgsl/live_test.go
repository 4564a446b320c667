//go:build cgo && !js

package wgsl_test

import (
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// TestRunnerLiveView pins the GPU runner's live view to the CPU runner's:
// the experts every MoE layer routed each token to (a prefill in pieces,
// then greedy decode steps) and the KDA state norms after each step; it
// logs what the view costs per decoded token, and checks that without a
// hook a decode step is still one submission.
func TestRunnerLiveView(t *testing.T) {
	d := device(t)
	defer device(t).SetRepeatFusions(true, 0)() // the router inside gate/up and the AttnRes fold, which software adapters skip
	m := presetModel(t, "k3-nano", 1, "F32")
	L, K, V := m.Cfg.NumHiddenLayers, m.Cfg.TopK, m.Cfg.VocabSize
	prompt := make([]int, 37)
	for i := range prompt {
		prompt[i] = (i*97 + 13) % 512
	}
	const chunk = 16
	type routed map[int][][]int // layer → per token, sorted expert ids
	record := func(into routed) func(layer int, experts []int, T, K int) {
		return func(layer int, experts []int, T, K int) {
			for t := 0; t < T; t++ {
				into[layer] = append(into[layer], slices.Sorted(slices.Values(slices.Clone(experts[t*K:(t+1)*K]))))
			}
		}
	}
	cpu := model.NewRunner(m, model.Options{MaxChunk: chunk})
	defer cpu.Close()
	st := m.NewState()
	gpu, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: chunk, MaxContext: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer gpu.Close()
	want, got := routed{}, routed{}
	rec := record(want)
	cpu.RouteHook = func(layer int, experts []int, _ []float32, T, K int) { rec(layer, experts, T, K) }
	if err := gpu.SetRouteHook(record(got)); err != nil {
		t.Fatal(err)
	}
	logits := make([]float32, chunk*V)
	norms := make([]float64, L)
	checkNorms := func(when string) {
		t.Helper()
		if err := gpu.KDANorms(norms); err != nil {
			t.Fatal(err)
		}
		kda := 0
		for i, s := range st.Layers {
			if s == nil {
				if !math.IsNaN(norms[i]) {
					t.Fatalf("%s: layer %d has no KDA state but norm %v", when, i, norms[i])
				}
				continue
			}
			kda++
			var ss float64
			for _, v := range s[0] {
				ss += float64(v) * float64(v)
			}
			if w := math.Sqrt(ss); math.Abs(norms[i]-w) > 1e-3*w || w == 0 {
				t.Fatalf("%s: layer %d KDA norm %v on the GPU, %v on the CPU", when, i, norms[i], w)
			}
		}
		if kda == 0 {
			t.Fatal("k3-nano has no KDA layer")
		}
	}
	var tok int
	for p0 := 0; p0 < len(prompt); p0 += chunk {
		piece := prompt[p0:min(p0+chunk, len(prompt))]
		if err := cpu.Forward(st, piece, logits[:V]); err != nil {
			t.Fatal(err)
		}
		if tok, err = gpu.Greedy(piece); err != nil {
			t.Fatal(err)
		}
	}
	checkNorms("after the prompt")
	// decode steps that sample on the device (routing, norms and token in
	// one readback) alternate with steps that read the logits (routing
	// read after them, norms reduced when asked)
	glogits := make([]float32, V)
	for step := 0; step < 8; step++ {
		if err := cpu.Forward(st, []int{tok}, logits[:V]); err != nil {
			t.Fatal(err)
		}
		if step%2 == 0 {
			if tok, err = gpu.Greedy([]int{tok}); err != nil {
				t.Fatal(err)
			}
			if s := gpu.Stats(); s.Submits != 1 {
				t.Errorf("decode step with the view: %d submissions, want 1", s.Submits)
			}
		} else {
			if err := gpu.Forward([]int{tok}, glogits); err != nil {
				t.Fatal(err)
			}
			tok = generate.Argmax(glogits)
		}
		checkNorms(fmt.Sprintf("decode step %d", step))
	}
	if len(want) == 0 {
		t.Fatal("the CPU reported no routing")
	}
	for layer, w := range want {
		g := got[layer]
		if len(g) != len(prompt)+8 || len(w) != len(g) {
			t.Fatalf("layer %d: %d routed tokens on the GPU, %d on the CPU, want %d", layer, len(g), len(w), len(prompt)+8)
		}
		for i := range w {
			if !slices.Equal(g[i], w[i]) {
				t.Fatalf("layer %d token %d: GPU experts %v, CPU %v", layer, i, g[i], w[i])
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("GPU reported %d MoE layers, CPU %d", len(got), len(want))
	}
	// cost: decode steps with and without the view (routing + norms)
	decode := func(live bool) (time.Duration, wgsl.RunnerStats) {
		var s wgsl.RunnerStats
		t0 := time.Now()
		for i := 0; i < 16; i++ {
			if tok, err = gpu.Greedy([]int{tok}); err != nil {
				t.Fatal(err)
			}
			s = gpu.Stats()
			if live {
				if err := gpu.KDANorms(norms); err != nil {
					t.Fatal(err)
				}
			}
		}
		return time.Since(t0) / 16, s
	}
	withView, sv := decode(true)
	if err := gpu.SetRouteHook(nil); err != nil {
		t.Fatal(err)
	}
	without, s0 := decode(false)
	if s0.Submits != 1 || sv.Submits != 1 {
		t.Errorf("decode: %d submissions per token without the view, %d with it; want 1 and 1", s0.Submits, sv.Submits)
	}
	t.Logf("decode per token without the view %v (%d dispatches), with routing and KDA norms %v (%d dispatches); one submission each; K=%d",
		without, s0.Dispatches, withView, sv.Dispatches, K)
}

// SumSq's partial sums add up to the sum of squares across block edges
// (fewer values than one workgroup, exact blocks, a ragged last block, an
// offset view), and RouteCopy lays a piece's ids out token-major with a
// stride.
func TestSumSqAndRouteCopy(t *testing.T) {
	d := device(t)
	for _, n := range []int{1, 255, 4096, 4097, 3*4096 + 77} {
		x := make([]float32, n+3)
		var want float64
		for i := range x {
			x[i] = float32(math.Sin(float64(i)*0.37)) * 3
			if i >= 3 {
				want += float64(x[i]) * float64(x[i])
			}
		}
		in, err := d.UploadF32(x)
		if err != nil {
			t.Fatal(err)
		}
		groups := wgsl.SumSqGroups(n)
		out, err := d.NewBuffer(groups + 1)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SumSq(out.At(1), in.At(3), n); err != nil {
			t.Fatal(err)
		}
		part := make([]float32, groups)
		if err := d.ReadF32(out.At(1), part); err != nil {
			t.Fatal(err)
		}
		var got float64
		for _, p := range part {
			got += float64(p)
		}
		if math.Abs(got-want) > 1e-5*want {
			t.Errorf("n %d: sum of squares %v on the GPU, %v in float64", n, got, want)
		}
		in.Release()
		out.Release()
	}
	const T, K, stride = 5, 3, 7
	ids := make([]uint32, T*K)
	for i := range ids {
		ids[i] = uint32(i*13 + 1)
	}
	in, err := d.UploadU32(ids)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Release()
	out, err := d.NewBuffer(2 + (T-1)*stride + K)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Release()
	if err := d.RouteCopy(out.At(2), in.At(0), T*K, K, stride); err != nil {
		t.Fatal(err)
	}
	got := make([]uint32, (T-1)*stride+K)
	if err := d.ReadU32(out.At(2), got); err != nil {
		t.Fatal(err)
	}
	for tok := 0; tok < T; tok++ {
		for k := 0; k < K; k++ {
			if got[tok*stride+k] != ids[tok*K+k] {
				t.Fatalf("token %d slot %d: %d, want %d", tok, k, got[tok*stride+k], ids[tok*K+k])
			}
		}
	}
	if err := d.RouteCopy(out.At(0), in.At(0), T*K, K, K-1); err == nil {
		t.Error("RouteCopy accepted a stride below K")
	}
}
