//go:build cgo && !js

package wgsl_test

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
	"github.com/tessera-llm/tessera/wgsl"
)

// newRunner is a GPU runner of m on the test device, closed when the test
// ends.
func newRunner(t testing.TB, m *model.Model, opt wgsl.RunnerOptions) *wgsl.Runner {
	t.Helper()
	g, err := wgsl.NewRunner(device(t), m, opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Close)
	return g
}

// presetModel builds the random checkpoint `tessera init-random --config
// name --seed seed` writes, in memory.
func presetModel(t testing.TB, name string, seed uint64, dt safetensors.DType) *model.Model {
	t.Helper()
	raw, err := presets.Read(name)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, model.RandomTensors(cfg, seed, dt), nil); err != nil {
		t.Fatal(err)
	}
	ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": buf.Bytes()}))
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.Load(cfg, ck)
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return m
}

// maxRelErr is max|got − want| / max|want| (Inf on NaN or length mismatch).
func maxRelErr(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range got {
		if math.IsNaN(float64(got[i])) {
			return math.Inf(1)
		}
		num = max(num, math.Abs(float64(got[i]-want[i])))
		den = max(den, math.Abs(float64(want[i])))
	}
	if den == 0 {
		return num
	}
	return num / den
}

const wholeModelTol = 1e-4

// TestRunnerMatchesCPU pins the whole model on the GPU to the CPU
// reference: for k3-nano (AttnRes, LatentMoE, SiTU, gated MLA with q-LoRA)
// and kimi-linear-nano (plain residuals, SiLU, full-rank q), prefill in
// several chunk sizes (all T×V logits of every piece compared), then 64
// decode steps; then, after Reset, the same prompt decoded greedily on the
// GPU (only token ids read back) must give the CPU's greedy tokens.
func TestRunnerMatchesCPU(t *testing.T) {
	d := device(t)
	defer device(t).SetRepeatFusions(true, 0)() // the router inside gate/up and the AttnRes fold, which software adapters skip
	prompt := matchPrompt()
	for _, tc := range []struct {
		preset string
		dt     safetensors.DType
	}{{"k3-nano", "F32"}, {"kimi-linear-nano", "F32"}, {"k3-nano", "BF16"}, {"qwen3-next-nano", "F32"}, {"deepseek-v3-nano", "F32"},
		{"../models/reference/configs/qwen3-next-variant.json", "F32"}, {"../models/reference/configs/deepseek-v3-variant.json", "F32"}} {
		m := presetModel(t, tc.preset, 1, tc.dt)
		chunks := []int{64, 7, 1}
		if tc.dt != "F32" {
			chunks = []int{64, 1}
		}
		for _, chunk := range chunks {
			t.Run(fmt.Sprintf("%s/%s/chunk=%d", strings.TrimSuffix(filepath.Base(tc.preset), ".json"), tc.dt, chunk), func(t *testing.T) {
				matchesCPU(t, d, m, prompt, chunk)
			})
		}
	}
}

// TestRunnerMatchesCPUChunkedKDA is TestRunnerMatchesCPU's check with
// every KDA piece of more than one token forced through the chunked
// kernels (kda_chunk.wgsl), whatever the automatic choice: one piece of
// 37 tokens (two chunks and a partial one), or pieces of 7 and a last of 2.
func TestRunnerMatchesCPUChunkedKDA(t *testing.T) {
	d := device(t)
	defer wgsl.ForceKDAChunkedForTest(true)()
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		m := presetModel(t, preset, 1, "F32")
		for _, chunk := range []int{64, 7} {
			t.Run(fmt.Sprintf("%s/chunk=%d", preset, chunk), func(t *testing.T) {
				matchesCPU(t, d, m, matchPrompt(), chunk)
			})
		}
	}
}

// matchPrompt is the 37-token prompt of TestRunnerMatchesCPU.
func matchPrompt() []int {
	prompt := make([]int, 37)
	for i := range prompt {
		prompt[i] = (i*97 + 13) % 512
	}
	return prompt
}

// matchesCPU runs TestRunnerMatchesCPU's checks for one model and chunk:
// prefill pieces and 64 decode steps against the CPU, then greedy decoding
// on the GPU from a reset state, creating no GPU object per token.
func matchesCPU(t *testing.T, d *wgsl.Device, m *model.Model, prompt []int, chunk int) {
	V := m.Cfg.VocabSize
	t0 := time.Now()
	cpu := model.NewRunner(m, model.Options{MaxChunk: chunk})
	defer cpu.Close()
	st := m.NewState()
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: chunk, MaxContext: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	want, got := make([]float32, chunk*V), make([]float32, chunk*V)
	worst := 0.0
	for p0 := 0; p0 < len(prompt); p0 += chunk {
		piece := prompt[p0:min(p0+chunk, len(prompt))]
		n := len(piece) * V
		if err := cpu.Forward(st, piece, want[:n]); err != nil {
			t.Fatal(err)
		}
		if err := g.Forward(piece, got[:n]); err != nil {
			t.Fatal(err)
		}
		e := maxRelErr(got[:n], want[:n])
		worst = max(worst, e)
		if e > wholeModelTol {
			t.Fatalf("prefill piece at %d: max relative error %.3g > %g", p0, e, wholeModelTol)
		}
	}
	var cpuTokens []int
	next := generate.Argmax(want[(min(chunk, len(prompt)-(len(prompt)-1)/chunk*chunk)-1)*V:][:V])
	for step := 0; step < 64; step++ {
		cpuTokens = append(cpuTokens, next)
		if err := cpu.Forward(st, []int{next}, want[:V]); err != nil {
			t.Fatal(err)
		}
		if err := g.Forward([]int{next}, got[:V]); err != nil {
			t.Fatal(err)
		}
		e := maxRelErr(got[:V], want[:V])
		worst = max(worst, e)
		if e > wholeModelTol {
			t.Fatalf("decode step %d: max relative error %.3g > %g", step, e, wholeModelTol)
		}
		next = generate.Argmax(want[:V])
	}
	// Greedy on the GPU from a reset state.
	if err := g.Reset(); err != nil {
		t.Fatal(err)
	}
	var tok int
	for p0 := 0; p0 < len(prompt); p0 += chunk {
		if tok, err = g.Greedy(prompt[p0:min(p0+chunk, len(prompt))]); err != nil {
			t.Fatal(err)
		}
	}
	objects := -1
	for step := 0; step < 64; step++ {
		if step == 2 {
			objects = d.ObjectsForTest()
		}
		if tok != cpuTokens[step] {
			t.Fatalf("greedy step %d: GPU token %d, CPU %d", step, tok, cpuTokens[step])
		}
		if tok, err = g.Greedy([]int{tok}); err != nil {
			t.Fatal(err)
		}
	}
	if n := d.ObjectsForTest(); n != objects {
		t.Errorf("decoding created GPU objects: %d cached objects after step 2, %d after step 64", objects, n)
	}
	s := g.Stats()
	t.Logf("worst max relative error %.2g; decode: %d dispatches, %d submits per token; %v",
		worst, s.Dispatches, s.Submits, time.Since(t0).Round(time.Millisecond))
}

// TestSessionSamplesOnGPU pins seeded sampling on the GPU (only token ids
// read back) to the CPU session with the same seed: the GPU sampler takes
// the CPU sampler's draws, so temperature, top-k, top-p and min-p pick the
// same tokens. A repetition penalty falls back to host sampling (also
// equal).
func TestSessionSamplesOnGPU(t *testing.T) {
	d := device(t)
	m := presetModel(t, "k3-nano", 3, "F32")
	prompt := []int{5, 17, 200, 3, 99, 42, 7}
	for _, o := range []generate.SamplerOptions{
		{Temperature: 1, Seed: 1},
		{Temperature: 0.8, TopK: 20, TopP: 0.9, Seed: 2},
		{Temperature: 1.2, MinP: 0.02, Seed: 3},
		{Temperature: 0.9, TopK: 50, RepetitionPenalty: 1.3, Seed: 4},
	} {
		t.Run(fmt.Sprintf("T=%g/k=%d/p=%g/min-p=%g/rep=%g", o.Temperature, o.TopK, o.TopP, o.MinP, o.RepetitionPenalty), func(t *testing.T) {
			opt := generate.Options{MaxTokens: 40, Sampler: o}
			run := func(s *generate.Session) []int {
				var out []int
				for tok, err := range s.Generate(prompt, opt) {
					if err != nil {
						t.Fatal(err)
					}
					out = append(out, tok)
				}
				return out
			}
			g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 16, MaxContext: 128})
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			if g.SamplesOnDevice(o, m.Cfg.VocabSize) == o.Penalizes() {
				t.Fatalf("k3-nano's %d logits should be sampled on the GPU exactly without a repetition penalty (rep=%g)", m.Cfg.VocabSize, o.RepetitionPenalty)
			}
			cpu := model.NewRunner(m, model.Options{MaxChunk: 16})
			defer cpu.Close()
			gt := run(generate.NewSessionOn(g, 128))
			ct := run(generate.NewSession(cpu, 128))
			if !slices.Equal(gt, ct) {
				t.Fatalf("sampled tokens differ:\nGPU %v\nCPU %v", gt, ct)
			}
			if slices.Equal(gt[:10], gt[10:20]) {
				t.Fatalf("sampling looks degenerate: %v", gt)
			}
		})
	}
}

// TestSessionLogitBiasOnGPU: a logit bias is added on the GPU (one more
// dispatch, still one submit per token), and
// greedy and seeded tokens equal the CPU session's; no banned token is
// picked.
func TestSessionLogitBiasOnGPU(t *testing.T) {
	m := presetModel(t, "k3-nano", 3, "F32")
	prompt := []int{5, 17, 200, 3, 99, 42, 7}
	run := func(s *generate.Session, o generate.SamplerOptions) []int {
		var out []int
		for tok, err := range s.Generate(prompt, generate.Options{MaxTokens: 24, Sampler: o}) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tok)
		}
		return out
	}
	cpu := model.NewRunner(m, model.Options{MaxChunk: 16})
	defer cpu.Close()
	base := run(generate.NewSession(cpu, 128), generate.SamplerOptions{})
	// the first greedy tokens banned, two others nudged
	var bias []generate.TokenBias
	for _, b := range []generate.TokenBias{{ID: base[0]}, {ID: base[1]}, {ID: base[2]}, {ID: base[3]}, {ID: 11, Bias: 1.5}, {ID: 300, Bias: -2}} {
		if b.Bias == 0 {
			b.Bias = generate.BanBias
		}
		if !slices.ContainsFunc(bias, func(x generate.TokenBias) bool { return x.ID == b.ID }) {
			bias = append(bias, b)
		}
	}
	for _, o := range []generate.SamplerOptions{{LogitBias: bias}, {Temperature: 0.9, TopK: 30, Seed: 6, LogitBias: bias}} {
		g := newRunner(t, m, wgsl.RunnerOptions{MaxChunk: 16, MaxContext: 128})
		if !g.SamplesOnDevice(o, m.Cfg.VocabSize) {
			t.Fatalf("T=%g: a logit bias should not keep sampling off the GPU", o.Temperature)
		}
		gt := run(generate.NewSessionOn(g, 128), o)
		stats := g.Stats()
		ct := run(generate.NewSession(cpu, 128), o)
		if !slices.Equal(gt, ct) {
			t.Fatalf("T=%g: biased tokens differ:\nGPU %v\nCPU %v", o.Temperature, gt, ct)
		}
		for _, id := range gt {
			if i := slices.IndexFunc(bias, func(b generate.TokenBias) bool { return b.ID == id }); i >= 0 && bias[i].Bias == generate.BanBias {
				t.Fatalf("T=%g: banned token %d picked: %v", o.Temperature, id, gt)
			}
		}
		if o.Temperature == 0 && slices.Equal(gt, base) {
			t.Fatalf("the bias changed nothing: %v", gt)
		}
		if stats.Submits != 1 {
			t.Errorf("T=%g: %d submits for the last decoded token, want 1", o.Temperature, stats.Submits)
		}
	}
}

// TestSamplesOnDeviceRepetitionRule: the GPU declines to sample exactly
// when the host sampler would apply a repetition penalty
// (generate.SamplerOptions.Penalizes; generate's TestRepetitionPenaltyRule
// is the host's side), and SampleNext refuses a penalty with its reason.
func TestSamplesOnDeviceRepetitionRule(t *testing.T) {
	m := presetModel(t, "k3-nano", 1, "F32")
	g := newRunner(t, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 64})
	for _, p := range []float32{0, 1, 0.5, 1.3, 4} {
		for _, temp := range []float32{0, 0.8} {
			o := generate.SamplerOptions{Temperature: temp, RepetitionPenalty: p}
			if g.SamplesOnDevice(o, m.Cfg.VocabSize) == o.Penalizes() {
				t.Errorf("T=%g rep=%g: SamplesOnDevice %v, Penalizes %v", temp, p, !o.Penalizes(), o.Penalizes())
			}
			if _, err := g.SampleNext([]int{1, 2}, o, m.Cfg.VocabSize, 0.5); (err != nil) != o.Penalizes() {
				t.Errorf("T=%g rep=%g: SampleNext error %v", temp, p, err)
			}
		}
	}
}

// TestRunnerSplitWeights runs k3-nano with the embedding table and lm_head
// split over several buffers (as tensors larger than one 128 MiB binding
// are): logits and greedy tokens equal the CPU's.
func TestRunnerSplitWeights(t *testing.T) {
	d := device(t)
	m := presetModel(t, "k3-nano", 1, "F32")
	c := m.Cfg
	defer wgsl.SetMatPartWordsForTest(c.VocabSize * c.HiddenSize / 3)()
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	cpu := model.NewRunner(m, model.Options{MaxChunk: 8})
	defer cpu.Close()
	st := m.NewState()
	V := c.VocabSize
	prompt := []int{1, V - 1, V / 3, V/3 - 1, 2*V/3 + 1, 7}
	want, got := make([]float32, len(prompt)*V), make([]float32, len(prompt)*V)
	if err := cpu.Forward(st, prompt, want); err != nil {
		t.Fatal(err)
	}
	if err := g.Forward(prompt, got); err != nil {
		t.Fatal(err)
	}
	if e := maxRelErr(got, want); e > wholeModelTol {
		t.Fatalf("prefill with split weights: max relative error %.3g", e)
	}
	tok := generate.Argmax(want[(len(prompt)-1)*V:])
	for step := range 8 {
		if err := cpu.Forward(st, []int{tok}, want[:V]); err != nil {
			t.Fatal(err)
		}
		next, err := g.Greedy([]int{tok})
		if err != nil {
			t.Fatal(err)
		}
		if w := generate.Argmax(want[:V]); next != w {
			t.Fatalf("step %d: GPU token %d, CPU %d", step, next, w)
		}
		tok = next
	}
}

// countingSource is a checkpoint file readable only through ReadAt (as the
// browser's JavaScript-backed files are), counting the bytes read.
type countingSource struct {
	b    []byte
	read *int64
}

func (s countingSource) ReadAt(p []byte, off int64) (int, error) {
	*s.read += int64(len(p))
	return bytes.NewReader(s.b).ReadAt(p, off)
}
func (s countingSource) Size() int64 { return int64(len(s.b)) }

// TestRunnerDeferredWeights builds the GPU runner from a model loaded with
// model.LoadDeferred: loading reads only the small vectors, the upload
// reads each matrix once and keeps none of them in host memory, and the
// logits equal the CPU's on the eagerly loaded model. The CPU runner
// refuses the deferred model.
func TestRunnerDeferredWeights(t *testing.T) {
	d := device(t)
	raw, err := presets.Read("k3-nano")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, model.RandomTensors(cfg, 5, "BF16"), nil); err != nil {
		t.Fatal(err)
	}
	var read int64
	ck, err := safetensors.Open(func(name string) (safetensors.Source, error) {
		if name != "model.safetensors" {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return countingSource{buf.Bytes(), &read}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	m, err := model.LoadDeferred(cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	size := int64(buf.Len())
	if read > size/5 {
		t.Fatalf("LoadDeferred read %d of %d bytes: matrices were loaded", read, size)
	}
	last := m.Layers[len(m.Layers)-1]
	if !m.LMHead.Deferred() || last.MoE == nil || !last.MoE.Experts[0].GateProj.Deferred() {
		t.Fatal("LoadDeferred left matrices loaded")
	}
	if err := model.NewRunner(m, model.Options{}).Forward(m.NewState(), []int{1}, nil); err == nil ||
		!strings.Contains(err.Error(), "deferred") {
		t.Fatalf("CPU forward on a deferred model: %v, want an error saying why", err)
	}
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if read < size*9/10 || read > size*11/10 {
		t.Errorf("the upload read %d bytes of a %d-byte checkpoint, want each matrix once", read, size)
	}
	if !m.LMHead.Deferred() || m.LMHead.U16 != nil {
		t.Error("the upload kept lm_head in host memory")
	}
	eager, err := model.Load(cfg, ck)
	if err != nil {
		t.Fatal(err)
	}
	cpu := model.NewRunner(eager, model.Options{MaxChunk: 8})
	defer cpu.Close()
	prompt := []int{3, 1, 4, 1, 5, 9, 2, 6}
	V := cfg.VocabSize
	want, got := make([]float32, len(prompt)*V), make([]float32, len(prompt)*V)
	if err := cpu.Forward(eager.NewState(), prompt, want); err != nil {
		t.Fatal(err)
	}
	if err := g.Forward(prompt, got); err != nil {
		t.Fatal(err)
	}
	if e := maxRelErr(got, want); e > wholeModelTol {
		t.Fatalf("deferred-loaded GPU logits: max relative error %.3g", e)
	}
}

// TestEstimateMemory checks the GPU memory estimate against what a runner
// allocates, and that a budget below it is refused with the figures.
func TestEstimateMemory(t *testing.T) {
	d := device(t)
	for _, tc := range []struct {
		preset string
		dt     safetensors.DType
	}{{"k3-nano", "F32"}, {"k3-nano", "BF16"}, {"kimi-linear-nano", "BF16"}} {
		m := presetModel(t, tc.preset, 1, tc.dt)
		opt := wgsl.RunnerOptions{MaxChunk: 16, MaxContext: 512}
		est := wgsl.EstimateMemory(m, opt)
		g, err := wgsl.NewRunner(d, m, opt)
		if err != nil {
			t.Fatal(err)
		}
		got := g.Bytes()
		g.Close()
		t.Logf("%s %s: estimate %d (weights %d, state %d, scratch %d), allocated %d", tc.preset, tc.dt, est.Total(), est.Weights, est.State, est.Scratch, got)
		if r := float64(est.Total()) / float64(got); r < 0.9 || r > 1.25 {
			t.Errorf("%s %s: estimate %d bytes, runner allocated %d (ratio %.2f)", tc.preset, tc.dt, est.Total(), got, r)
		}
		opt.MemoryBudget = est.Total() / 2
		_, err = wgsl.NewRunner(d, m, opt)
		var me *wgsl.MemoryError
		if !errors.As(err, &me) || !strings.Contains(err.Error(), "needs about") || !strings.Contains(err.Error(), "is available") {
			t.Errorf("%s: budget of half the estimate: %v, want a MemoryError with the figures", tc.preset, err)
		}
	}
}

// Every fused GPU kernel equals the unfused math it replaces: the same
// model with the GPU backend's capabilities hidden (nn's fallbacks over
// the basic ops) gives the same logits, for a prefill piece and decoded
// tokens, with Block AttnRes (k3-nano) and without (kimi-linear-nano), and
// needs more dispatches per decoded token.
func TestRunnerFusedEqualsUnfused(t *testing.T) {
	d := device(t)
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		t.Run(preset, func(t *testing.T) {
			m := presetModel(t, preset, 1, "F32")
			V := m.Cfg.VocabSize
			run := func(unfused bool) ([]float32, int) {
				g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 16, MaxContext: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				if unfused {
					g.UnfusedForTest(m)
				}
				return promptThenDecode(t, g, V, 13), g.Stats().Dispatches
			}
			plain, np := run(true)
			// With the repeating fusions (SetRepeatFusions: the AttnRes
			// reads inside the GEMVs that read them, as on a GPU with 8 rows
			// per workgroup or as a CPU driver would with 2 workgroups; the
			// router inside gate/up) or without: the same logits, fewer
			// dispatches with them.
			var counts []int
			for _, f := range []struct {
				on     bool
				groups int
			}{{false, 0}, {true, 0}, {true, 2}} {
				restore := d.SetRepeatFusions(f.on, f.groups)
				fused, nf := run(false)
				restore()
				if e := maxRelErr(fused, plain); e > 1e-5 {
					t.Fatalf("fused (repeating fusions %v, groups %d) vs unfused: max relative error %.3g", f.on, f.groups, e)
				}
				if nf >= np {
					t.Errorf("decode: %d dispatches fused, %d unfused: the fused kernels were not used", nf, np)
				}
				counts = append(counts, nf)
			}
			if counts[1] >= counts[0] || counts[2] != counts[1] {
				t.Errorf("decode: %d dispatches with the repeating fusions, %d without: they were not used", counts[1], counts[0])
			}
			t.Logf("decode: %d dispatches fused (%d with the repeating fusions), %d unfused", counts[0], counts[1], np)
		})
	}
}

// TestDecodeAllocatesNothing: a decode step on the GPU allocates nothing in
// tessera's Go code, for every family, whether it reads the logits back
// (Forward) or only the sampled token (SampleNext, greedy and seeded): the
// recorded commands' arguments, uniforms, bind groups, kernel lookups and
// the readback are all reused from token to token. What the cgo WebGPU
// binding allocates per submission (its command encoder, compute pass and
// map-callback handle) is out of tessera's hands; it is bounded per step,
// independent of the dozens of dispatches a step records.
func TestDecodeAllocatesNothing(t *testing.T) {
	d := device(t)
	const runs, maxBinding = 40, 64
	var seen [][2]float64 // dispatches and binding allocations per token, per family and step
	for _, name := range []string{"k3-nano", "k3-nano repeating", "kimi-linear-nano", "qwen3-next-nano", "deepseek-v3-nano", "deepseek-v3-nano repeating"} {
		t.Run(name, func(t *testing.T) {
			// by adapter, and with the repeating fusions (the AttnRes fold,
			// the router inside gate/up) as a GPU runs them
			if preset, ok := strings.CutSuffix(name, " repeating"); ok {
				name = preset
				defer d.SetRepeatFusions(true, 0)()
			}
			m := presetModel(t, name, 1, "F32")
			g := newRunner(t, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 256})
			V := m.Cfg.VocabSize
			logits := make([]float32, V)
			if err := g.Forward([]int{1, 2, 3, 4, 5}, logits); err != nil {
				t.Fatal(err)
			}
			tok := []int{6}
			for _, step := range []struct {
				name string
				run  func() error
			}{
				{"Forward", func() error { return g.Forward(tok, logits) }},
				{"SampleNext greedy", func() error {
					id, err := g.SampleNext(tok, generate.SamplerOptions{}, V, 0)
					tok[0] = id
					return err
				}},
				{"SampleNext", func() error {
					id, err := g.SampleNext(tok, generate.SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.9}, V, 0.37)
					tok[0] = id
					return err
				}},
			} {
				if err := step.run(); err != nil { // warm: the first step of a kind makes its bind groups
					t.Fatal(err)
				}
				d0 := d.Dispatches
				ours, binding := allocsPerRun(runs, func() {
					if err := step.run(); err != nil {
						t.Fatal(err)
					}
				})
				perStep := (d.Dispatches - d0) / runs
				t.Logf("%s: %d dispatches, %v allocations by the WebGPU binding per token", step.name, perStep, binding)
				if ours != 0 {
					t.Errorf("%s: %v allocations per token in tessera's code, want none", step.name, ours)
				}
				if binding > maxBinding {
					t.Errorf("%s: %v allocations per token in the WebGPU binding (%d dispatches): more than its per-submission cost", step.name, binding, perStep)
				}
				seen = append(seen, [2]float64{float64(perStep), binding})
			}
		})
	}
	// the binding's allocations are per submission: the same for every
	// family and step, whatever their dispatches
	slices.SortFunc(seen, func(a, b [2]float64) int { return cmp.Compare(a[0], b[0]) })
	if lo, hi := seen[0], seen[len(seen)-1]; hi[0] > 2*lo[0] && math.Abs(hi[1]-lo[1]) >= 1 {
		t.Errorf("the WebGPU binding allocates %v per token at %v dispatches and %v at %v: it grows with the dispatches", lo[1], lo[0], hi[1], hi[0])
	}
}

// allocsPerRun runs f n times and returns the heap allocations per run f
// made outside the cgo WebGPU binding (ours) and inside it (a stack through
// github.com/cogentcore/webgpu or runtime/cgo), from the memory profile at
// a sampling rate of 1. The runtime's caches of type assertions (made at
// random misses, once per call site) are not counted.
func allocsPerRun(n int, f func()) (ours, binding float64) {
	defer func(rate int) { runtime.MemProfileRate = rate }(runtime.MemProfileRate)
	runtime.MemProfileRate = 1
	o0, b0 := profiledAllocs()
	for range n {
		f()
	}
	o1, b1 := profiledAllocs()
	return float64(o1-o0) / float64(n), float64(b1-b0) / float64(n)
}

// profiledAllocs sums the memory profile's allocation counts, split by
// whether the WebGPU binding made them.
func profiledAllocs() (ours, binding int64) {
	runtime.GC() // the profile is published by garbage collections
	runtime.GC()
	var recs []runtime.MemProfileRecord
	for {
		n, ok := runtime.MemProfile(recs, true)
		if ok {
			recs = recs[:n]
			break
		}
		recs = make([]runtime.MemProfileRecord, n+64)
	}
	for _, r := range recs {
		inBinding, inRun := false, false
		frames := runtime.CallersFrames(r.Stack())
		for {
			fr, more := frames.Next()
			switch {
			case strings.Contains(fr.Function, "cogentcore/webgpu"), strings.HasPrefix(fr.Function, "runtime/cgo."):
				inBinding = true
			case strings.HasSuffix(fr.Function, ".profiledAllocs"),
				fr.Function == "runtime.buildTypeAssertCache", fr.Function == "runtime.buildInterfaceSwitchCache":
				// this accounting's own allocations; the runtime's cache of
				// a type assertion's result (filled at random misses, once)
				more = false
			case strings.HasSuffix(fr.Function, ".allocsPerRun"):
				inRun = true // made by f
			}
			if !more {
				break
			}
		}
		switch {
		case !inRun:
		case inBinding:
			binding += r.AllocObjects
		default:
			ours += r.AllocObjects
		}
	}
	return ours, binding
}

// TestGEMVLanesSameBits: the GEMV and expert kernels' two shapes (a GPU's
// 8 threads per row and a software adapter's one, Device.SetGEMVLanes)
// give the same logits bit for bit, prefill and decode, dense and
// quantized weights, with the repeating fusions on and off.
func TestGEMVLanesSameBits(t *testing.T) {
	d := device(t)
	for _, tc := range []struct {
		preset string
		dtype  safetensors.DType
		repeat bool
	}{{"k3-nano", "F32", false}, {"k3-nano", "BF16", true}, {"kimi-linear-nano", "F16", false}} {
		t.Run(fmt.Sprintf("%s %s repeating=%v", tc.preset, tc.dtype, tc.repeat), func(t *testing.T) {
			m := presetModel(t, tc.preset, 1, tc.dtype)
			V := m.Cfg.VocabSize
			defer d.SetRepeatFusions(tc.repeat, 0)()
			run := func(lanes int) []float32 {
				defer d.SetGEMVLanes(lanes)()
				// the GEMVs run with the shape asked for (its kernels are
				// compiled apart: "|lanes1")
				// and the prefill GEMM: main_rows in the one-thread shape
				gemvs, shaped, gemms, rowGemms := 0, 0, 0, 0
				defer d.TraceBindingsForTest(func(k string, _ []wgsl.BindingForTest) {
					if strings.Contains(k, "linear.wgsl:gemv") {
						gemvs++
						if strings.Contains(k, "|lanes1") == (lanes == 1) {
							shaped++
						}
					}
					if strings.Contains(k, "linear.wgsl:main") {
						gemms++
						if strings.Contains(k, "linear.wgsl:main_rows") {
							rowGemms++
						}
					}
				})()
				defer func() {
					if gemvs == 0 || shaped != gemvs {
						t.Errorf("lanes %d: %d of %d GEMV dispatches with that shape", lanes, shaped, gemvs)
					}
					if want := map[bool]int{true: gemms, false: 0}[lanes == 1]; gemms == 0 || rowGemms != want {
						t.Errorf("lanes %d: %d of %d prefill GEMMs ran main_rows, want %d", lanes, rowGemms, gemms, want)
					}
				}()
				g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 16, MaxContext: 64})
				if err != nil {
					t.Fatal(err)
				}
				defer g.Close()
				return promptThenDecode(t, g, V, 9)
			}
			one, eight := run(1), run(8)
			for i := range one {
				if math.Float32bits(one[i]) != math.Float32bits(eight[i]) {
					t.Fatalf("logit %d: %v with one thread per row, %v with eight", i, one[i], eight[i])
				}
			}
		})
	}
}

// promptThenDecode runs a prompt of n tokens and then 4 decode steps on g
// (vocabulary V) and returns every logit: the prompt's, then each step's.
func promptThenDecode(t *testing.T, g *wgsl.Runner, V, n int) []float32 {
	t.Helper()
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = (i*37 + 5) % V
	}
	logits := make([]float32, n*V)
	if err := g.Forward(prompt, logits); err != nil {
		t.Fatal(err)
	}
	out := append([]float32(nil), logits...)
	for step := 0; step < 4; step++ {
		if err := g.Forward([]int{(step*11 + 3) % V}, logits[:V]); err != nil {
			t.Fatal(err)
		}
		out = append(out, logits[:V]...)
	}
	return out
}
