package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
)

// requireGPU skips without a WebGPU adapter, except under CI=true where a
// missing adapter (lavapipe) is a failure.
func requireGPU(t *testing.T) {
	d, err := native.Open()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no WebGPU adapter: %v", err)
		}
		t.Skipf("no WebGPU adapter: %v", err)
	}
	d.Close()
}

// The same generation and logits come out of --backend gpu as --backend cpu.
func TestCLIGPUBackendMatchesCPU(t *testing.T) {
	requireGPU(t)
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		dir := filepath.Join(t.TempDir(), preset)
		code, _, errs := tessera(t, "init-random", "--config", preset, "--seed", "3", "--dtype", "bf16", "--out", dir)
		require.Zero(t, code, errs)
		run := func(backend string) string {
			code, out, errs := tessera(t, "run", "--model", dir, "--tokens", "5,6,7,8,9,10,11", "--max-tokens", "12", "--ids", "--backend", backend, "--chunk", "4")
			require.Zero(t, code, errs)
			return out
		}
		require.Equal(t, run("cpu"), run("gpu"), preset)
		require.Equal(t, run("cpu"), run("auto"), preset)
		npy := func(backend string) []float32 {
			p := filepath.Join(dir, backend+".npy")
			code, _, errs := tessera(t, "logits", "--model", dir, "--tokens", "1,2,3,4,5,6", "--out", p, "--backend", backend, "--chunk", "4")
			require.Zero(t, code, errs)
			v, _ := readNPY(t, p)
			return v
		}
		c, g := npy("cpu"), npy("gpu")
		var num, den float64
		for i := range c {
			num = max(num, abs64(float64(c[i]-g[i])))
			den = max(den, abs64(float64(c[i])))
		}
		require.Less(t, num/den, 1e-4, preset)
	}
}

func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// --backend auto says in one line what it chose and why: the CPU on a
// software adapter (lavapipe here), with the CPU backend's output; the GPU
// on a real one, or on a software one when TESSERA_AUTO_SOFTWARE_GPU=1.
func TestCLIAutoBackendChoice(t *testing.T) {
	requireGPU(t)
	d, err := native.OpenQuiet()
	require.NoError(t, err)
	ad := d.Adapter()
	d.Close()
	require.NotEmpty(t, ad.Type, "native.Open must describe the adapter")
	dir := filepath.Join(t.TempDir(), "k3-nano")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "4", "--out", dir)
	require.Zero(t, code, errs)
	args := []string{"run", "--model", dir, "--tokens", "5,6,7", "--max-tokens", "6", "--ids"}
	code, cpu, errs := tessera(t, append(args, "--backend", "cpu")...)
	require.Zero(t, code, errs)
	require.Empty(t, errs)
	code, auto, errs := tessera(t, append(args, "--backend", "auto")...)
	require.Zero(t, code, errs)
	require.Equal(t, cpu, auto)
	line := strings.TrimSpace(errs)
	require.NotContains(t, line, "\n", "one line on stderr")
	if why := ad.Software(); why != "" {
		require.Contains(t, line, "--backend auto chose the CPU: ")
		require.Contains(t, line, why)
		require.Contains(t, line, ad.Driver)
		require.Contains(t, line, "--backend gpu forces it")
	} else {
		require.Contains(t, line, "--backend auto chose the GPU: ")
	}
	t.Setenv(wgsl.AutoSoftwareEnv, "1")
	code, allowed, errs := tessera(t, append(args, "--backend", "auto")...)
	require.Zero(t, code, errs)
	require.Equal(t, cpu, allowed)
	require.Contains(t, errs, "--backend auto chose the GPU: ")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line on stderr:\n%s", errs)
}

// A model larger than the GPU memory (TESSERA_GPU_MEMORY) is refused with
// what it needs and what is available on --backend gpu, and runs on the
// CPU with one notice on --backend auto.
func TestCLIGPUMemoryBudget(t *testing.T) {
	requireGPU(t)
	dir := filepath.Join(t.TempDir(), "k3-nano")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "3", "--out", dir)
	require.Zero(t, code, errs)
	t.Setenv("TESSERA_GPU_MEMORY", "100K")
	args := []string{"run", "--model", dir, "--tokens", "5,6,7", "--max-tokens", "4", "--ids"}
	code, _, errs = tessera(t, append(args, "--backend", "gpu")...)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "needs about")
	require.Contains(t, errs, "but 0.1 MiB is available")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "one line on stderr:\n%s", errs)
	t.Setenv(wgsl.AutoSoftwareEnv, "1") // let auto try lavapipe, to reach the budget check
	code, auto, errs := tessera(t, append(args, "--backend", "auto")...)
	require.Zero(t, code, errs)
	require.Contains(t, errs, "--backend auto chose the CPU: no usable GPU")
	require.Contains(t, errs, "needs about")
	code, cpu, errs := tessera(t, append(args, "--backend", "cpu")...)
	require.Zero(t, code, errs)
	require.Equal(t, cpu, auto)
	t.Setenv("TESSERA_GPU_MEMORY", "lots")
	code, _, errs = tessera(t, append(args, "--backend", "gpu")...)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "TESSERA_GPU_MEMORY")
}

// `tessera bench --backend gpu` measures the GPU runner (not the CPU):
// device copy bandwidth, dispatches and submissions per token, GPU memory,
// the context sweep; the CPU-only per-op plot is refused rather than
// silently taken on the CPU.
func TestBenchGPU(t *testing.T) {
	requireGPU(t)
	dir := filepath.Join(t.TempDir(), "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	js := filepath.Join(t.TempDir(), "b.json")
	code, out, errs := tessera(t, "bench", "--model", dir, "--backend", "gpu", "--prompt-len", "8", "--gen", "4", "--repeats", "1", "--json", js)
	require.Zero(t, code, errs)
	require.Contains(t, out, "dispatches")
	raw, err := os.ReadFile(js)
	require.NoError(t, err)
	var res benchResult
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Equal(t, "gpu", res.Backend)
	require.NotEmpty(t, res.Adapter)
	require.Positive(t, res.DispatchesPerToken)
	require.Equal(t, 1, res.SubmitsPerToken)
	require.Positive(t, res.GPUBytes)
	require.Positive(t, res.DecodeTokPerS)
	require.Positive(t, res.MachineGBPerS)
	// the context sweep on the GPU: paged caches filled with synthetic
	// rows, state memory at the analytic figure
	code, out, errs = tessera(t, "bench", "--model", dir, "--backend", "gpu", "--prompt-len", "8", "--gen", "2", "--repeats", "1",
		"--ctx-sweep", "1k,3k", "--json", js)
	require.Zero(t, code, errs)
	require.Contains(t, out, "GPU state")
	raw, err = os.ReadFile(js)
	require.NoError(t, err)
	res = benchResult{}
	require.NoError(t, json.Unmarshal(raw, &res))
	require.Len(t, res.Sweep, 2)
	for i, L := range []int{1024, 3072} {
		p := res.Sweep[i]
		require.Equal(t, L, p.Context)
		require.Positive(t, p.DecodeTokPerS)
		require.InDelta(t, 1, float64(p.StateBytes)/float64(p.Analytic), 0.1, "context %d: state %d, analytic %d", L, p.StateBytes, p.Analytic)
	}
	code, _, errs = tessera(t, "bench", "--model", dir, "--backend", "gpu", "--plot", t.TempDir())
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--plot")
}

// `tessera bench --gpu-memory 100%,50%,25%` sweeps the expert budget of
// a random model with 48 experts: one row per budget in the JSON (fewer experts resident, less GPU
// memory, the expert cache's hit rate and uploads measured), a chart;
// --n-cpu-moe reports the layers and time on the CPU; a budget below the
// dense part is refused naming the size needed.
func TestCLIBenchGPUMemorySweep(t *testing.T) {
	requireGPU(t)
	dir := t.TempDir()
	model := filepath.Join(dir, "m")
	code, _, errs := tessera(t, "init-random", "--config", "../../wgsl/testdata/k3-nano-experts.json", "--seed", "3", "--dtype", "bf16", "--out", model)
	require.Zero(t, code, errs)
	js := filepath.Join(dir, "sweep.json")
	code, out, errs := tessera(t, "bench", "--model", model, "--backend", "gpu", "--gpu-memory", "100%,50%,25%",
		"--prompt-len", "4", "--gen", "6", "--repeats", "1", "--json", js, "--plot", dir)
	require.Zero(t, code, errs)
	require.Contains(t, out, "GPU memory sweep")
	var sw memorySweep
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &sw))
	require.Len(t, sw.Budgets, 3)
	for i, want := range []int{48, 24, 12} {
		r := sw.Budgets[i]
		require.Equal(t, want, r.ExpertSlots, r.GPUMemory)
		require.Positive(t, r.DecodeTokPerS)
		require.Positive(t, r.GPUWeightBytes)
		if i > 0 { // fewer experts resident: the buffers shrink by their bytes (slot tables aside)
			require.Less(t, r.GPUBytes, sw.Budgets[i-1].GPUBytes)
			drop := float64(sw.Budgets[i-1].GPUWeightBytes - r.GPUWeightBytes)
			require.Positive(t, drop)
			require.InDelta(t, drop, float64(sw.Budgets[i-1].GPUBytes-r.GPUBytes), 0.01*drop)
			require.LessOrEqual(t, r.ExpertHitRate, 1.0)
		}
		if i == 2 { // 12 of 48 experts: six decoded tokens miss
			require.Positive(t, r.ExpertUploadBytesPerToken)
			require.Less(t, r.ExpertHitRate, 1.0)
		}
	}
	_, err = os.Stat(filepath.Join(dir, "gpu-memory-sweep.png"))
	require.NoError(t, err)

	// --n-cpu-moe with a budget for the other layers
	one := filepath.Join(dir, "one.json")
	code, out, errs = tessera(t, "bench", "--model", model, "--backend", "gpu", "--gpu-memory", "25%", "--n-cpu-moe", "1",
		"--prompt-len", "4", "--gen", "6", "--repeats", "1", "--json", one)
	require.Zero(t, code, errs)
	require.Contains(t, out, "experts on CPU")
	var r benchResult
	b, err = os.ReadFile(one)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &r))
	require.Equal(t, 1, r.CPUMoELayers)
	require.Equal(t, 12, r.ExpertSlots)
	require.Positive(t, r.ExpertCPUMsPerToken)

	code, _, errs = tessera(t, "bench", "--model", model, "--backend", "gpu", "--gpu-memory", "100K", "--gen", "1", "--repeats", "1")
	require.NotZero(t, code)
	require.Contains(t, errs, "at least")
	require.Contains(t, errs, "streamed through 4 per MoE layer")
	require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
}
