package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/models/presets"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/native/llamacpp"
)

// nanoDir writes a random BF16 k3-nano checkpoint.
func nanoDir(t *testing.T) string {
	t.Helper()
	raw, err := presets.Read("k3-nano")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := model.WriteRandomDir(dir, cfg, 1, "BF16"); err != nil {
		t.Fatal(err)
	}
	return dir
}

// run --engine tessera prints one JSON object with every figure filled.
func TestRunTessera(t *testing.T) {
	dir := nanoDir(t)
	var out, errb bytes.Buffer
	if err := run([]string{"run", "--engine", "tessera", "--model", dir, "--prompt-lens", "8,16", "--gen", "2"}, &out, &errb); err != nil {
		t.Fatalf("%v\n%s", err, errb.String())
	}
	var r RunResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %q", err, out.String())
	}
	if r.Engine != "tessera" || r.Prefill["8"] <= 0 || r.Prefill["16"] <= 0 || r.Decode <= 0 || len(r.FirstIDs) != 2 || r.DecodeAfter != 8 {
		t.Fatalf("result %+v", r)
	}
}

func TestRunErrors(t *testing.T) {
	for _, args := range [][]string{
		{"run", "--engine", "other"},
		{"run", "--engine", "tessera"},
		{"run", "--engine", "llamacpp"},
		{"run", "--engine", "tessera", "--model", "x", "--prompt-lens", "0"},
		{"bench"},
		{"nothing"},
	} {
		var out, errb bytes.Buffer
		if err := run(args, &out, &errb); err == nil {
			t.Errorf("%v: no error", args)
		}
	}
}

func TestMedianSpread(t *testing.T) {
	m, s := medianSpread([]float64{3, 1, 2})
	if m != 2 || s != 1 {
		t.Fatalf("median %v spread %v", m, s)
	}
	if m, s := medianSpread(nil); m != 0 || s != 0 {
		t.Fatalf("empty: median %v spread %v", m, s)
	}
	m, s = medianSpread([]float64{4, 2})
	if m != 3 || s != 2.0/3 {
		t.Fatalf("median %v spread %v", m, s)
	}
}

// bench runs both engines in child processes and reports a row per
// metric with a ratio; needs the llama.cpp libraries (skips without them
// unless CI=true).
func TestBenchSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the command")
	}
	if _, err := llamacpp.Open(""); err != nil {
		if errors.Is(err, llamacpp.ErrNotInstalled) && os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	bin := filepath.Join(t.TempDir(), "tessera-peer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	dir := nanoDir(t)
	js := filepath.Join(t.TempDir(), "peers.json")
	// A block-format file both engines load as it is (--gguf; llama.cpp's
	// repacked Q4_0 buffers abort on it, as on Q8_0: variant.NoExtraBuffers).
	q4 := filepath.Join(t.TempDir(), "nano.q4_0.gguf")
	if err := gguf.Export(dir, q4, gguf.ExportOptions{Type: "q4_0"}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "bench", "--bf16", dir, "--gguf", q4, "--gguf-no-extra-buffers", "--gguf-dir", t.TempDir(), "--threads", "1", "--rounds", "1",
		"--prompt-lens", "8", "--gen", "4", "--json", js)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	var rep BenchReport
	b, err := os.ReadFile(js)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Rows) != 4 || len(rep.Runs) != 4 || !strings.Contains(string(out), "decode 4") ||
		rep.Rows[2].Variant != "nano.q4_0" {
		t.Fatalf("report %+v\n%s", rep, out)
	}
	for _, r := range rep.Rows {
		if r.Tessera <= 0 || r.Llama <= 0 || r.Ratio <= 0 {
			t.Fatalf("row %+v", r)
		}
	}
}

// run --gpu runs tessera on the WebGPU runner (lavapipe here) with the same
// greedy ids as the CPU runner and reports dispatches and submissions per
// token. (llama.cpp's Vulkan side compiles its pipelines for minutes on
// lavapipe, so it is timed by make bench-vulkan, not here.)
func TestRunTesseraGPU(t *testing.T) {
	if _, err := native.Open(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no WebGPU adapter: %v", err)
		}
		t.Skipf("no WebGPU adapter: %v", err)
	}
	dir := nanoDir(t)
	runOne := func(extra ...string) RunResult {
		var out, errb bytes.Buffer
		args := append([]string{"run", "--engine", "tessera", "--model", dir, "--prompt-lens", "8", "--gen", "4"}, extra...)
		if err := run(args, &out, &errb); err != nil {
			t.Fatalf("%v\n%s", err, errb.String())
		}
		var r RunResult
		if err := json.Unmarshal(out.Bytes(), &r); err != nil {
			t.Fatalf("%v: %q", err, out.String())
		}
		return r
	}
	cpu, gpu := runOne(), runOne("--gpu")
	if gpu.Dispatches <= 0 || gpu.Submits != 1 || !strings.Contains(gpu.Detail, "WebGPU") || gpu.Decode <= 0 {
		t.Fatalf("gpu result %+v", gpu)
	}
	if cpu.Dispatches != 0 || !slices.Equal(cpu.FirstIDs, gpu.FirstIDs) {
		t.Fatalf("first ids: cpu %v, gpu %v", cpu.FirstIDs, gpu.FirstIDs)
	}
}

// Offloading layers with the CPU build of llama.cpp is refused, naming the
// Vulkan build to fetch.
func TestRunLlamaGPUNeedsVulkanBuild(t *testing.T) {
	if _, err := llamacpp.Open(""); err != nil {
		if errors.Is(err, llamacpp.ErrNotInstalled) && os.Getenv("CI") == "true" {
			t.Fatal(err)
		}
		t.Skip(err)
	}
	f := filepath.Join(t.TempDir(), "nano.gguf")
	if err := gguf.Export(nanoDir(t), f, gguf.ExportOptions{Type: "f16"}); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	err := run([]string{"run", "--engine", "llamacpp", "--gguf", f, "--gpu", "--llamacpp-dir", llamacpp.DefaultDir(), "--prompt-lens", "4", "--gen", "1"}, &out, &errb)
	if err == nil || !strings.Contains(err.Error(), "Vulkan build") {
		t.Fatalf("err %v", err)
	}
}
