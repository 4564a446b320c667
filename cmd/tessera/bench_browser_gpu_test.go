package main

import (
	"cmp"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/cmd/internal/host"
	"github.com/tessera-llm/tessera/core/engine"
)

// The GPU benchmarks' defaults (bench-browser-memory, bench-browser-experts):
// k3-mini on SwiftShader takes seconds per token, so a short prompt (16
// byte ids without a tokenizer) and few tokens.
const (
	benchGPUPrompt = "In the beginning"
	benchGPUTokens = 8
)

// benchGPUSetup is what both GPU benchmarks need: Chromium, the repository
// root, the page's bundle built into a temporary directory, and the
// settings shared with bench-browser (BENCH_PROMPT, BENCH_TOKENS,
// BENCH_ROUNDS), plus BENCH_PAGE_TIMEOUT (minutes a page may take).
type benchGPUSetup struct {
	chrome, root, dir, wasmDir string
	prompt                     string
	genTok, rounds             int
	timeout                    time.Duration
	loadBefore                 string
	env                        benchEnv
	pages                      int // pages loaded so far (profile names)
}

func newBenchGPUSetup(t *testing.T) *benchGPUSetup {
	t.Helper()
	if os.Getenv("TESSERA_BENCH_BROWSER") != "1" {
		t.Skip("the browser benchmarks run with TESSERA_BENCH_BROWSER=1 (make bench-browser-memory, bench-browser-experts)")
	}
	s := &benchGPUSetup{chrome: findChromium(), loadBefore: host.LoadAvg(), dir: t.TempDir()}
	if s.chrome == "" {
		t.Fatal("no Chromium (/usr/lib/chromium/chromium or $TESSERA_CHROMIUM); install it with scripts/setup.sh browser")
	}
	var err error
	if s.root, err = filepath.Abs("../.."); err != nil {
		t.Fatal(err)
	}
	s.prompt = cmp.Or(os.Getenv("BENCH_PROMPT"), benchGPUPrompt)
	s.genTok = benchEnvInt(t, "BENCH_TOKENS", benchGPUTokens)
	s.rounds = benchEnvInt(t, "BENCH_ROUNDS", 1)
	s.timeout = time.Duration(benchEnvInt(t, "BENCH_PAGE_TIMEOUT", 30)) * time.Minute
	s.wasmDir = filepath.Join(s.dir, "wasm")
	e2eBuildBundle(t, s.wasmDir)
	return s
}

// page loads model (a directory or a GGUF file, served as `tessera serve
// --model` serves it) on WebGPU in a fresh Chromium profile with the GPU
// memory budget gpuMemory ("" for none) and generates greedily: one cold
// load, measured.
func (s *benchGPUSetup) page(t *testing.T, model, gpuMemory, name string) benchPhase {
	t.Helper()
	var logBuf syncBuffer
	srv, err := newServer(serveConfig{ModelDir: model, WasmDir: s.wasmDir, Loopback: true, Log: &logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	mux := http.NewServeMux()
	mux.Handle("/", srv)
	site := newBenchSite(t, mux, &logBuf)
	defer site.close()
	s.pages++
	b, page, closeB := benchBrowser(t, s.chrome, filepath.Join(s.dir, fmt.Sprintf("g%d", s.pages)), &s.env)
	defer closeB()
	q := url.Values{"runtime": {"tessera"}, "backend": {"gpu"}, "prompt": {s.prompt}, "max": {strconv.Itoa(s.genTok)}, "phase": {"cold"}}
	if gpuMemory != "" {
		q.Set("gpuMemory", gpuMemory)
	}
	ph := site.load(t, b, page, q, name, s.timeout)
	if a := ph.Adapter; s.env.Adapter == "" && a.Available {
		s.env.Adapter = fmt.Sprintf("%s %s (%s), fallback %v", a.Vendor, a.Architecture, a.Description, a.Fallback)
		s.env.AdapterFeatures = a.Features
	}
	s.env.PromptTokens = ph.PromptTokens
	if !strings.HasPrefix(ph.RanOn, "gpu") || ph.GPUMemory == nil {
		t.Fatalf("%s ran on %q with GPU memory %+v, want the GPU and info().gpuMemory", name, ph.RanOn, ph.GPUMemory)
	}
	t.Logf("%s: load %.1f s, TTFT %.1f s, decode %.2f tok/s, GPU %s (weights %s), peak RSS renderer %s + GPU process %s; load average %s",
		name, ph.LoadMs/1000, ph.TTFTMs/1000, ph.DecodeTokS, bytesStr(ph.GPUMemory.Bytes), bytesStr(ph.GPUMemory.Weights),
		bytesStr(ph.PeakRSS.Renderer), bytesStr(ph.PeakRSS.GPU), host.LoadAvg())
	return ph
}

// settings describes the runs for the JSON.
func (s *benchGPUSetup) settings(what string) {
	s.env.finish(s.root, s.loadBefore)
	s.env.Rounds, s.env.Prompt, s.env.GenTokens = s.rounds, s.prompt, s.genTok
	s.env.Settings = "tessera only, Tessera.load backend gpu (WebGPU), default make wasm bundle, greedy; one cold load per run " +
		"(fresh profile); " + what
}

// path is p relative to the repository root (as the Makefile gives it),
// unless absolute.
func (s *benchGPUSetup) path(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(s.root, p)
}

// benchFileBytes is the size of a model: a GGUF file, or a directory's
// safetensors files.
func benchFileBytes(t *testing.T, model string) int64 {
	t.Helper()
	if strings.HasSuffix(model, ".gguf") {
		st, err := os.Stat(model)
		if err != nil {
			t.Fatal(err)
		}
		return st.Size()
	}
	files, err := filepath.Glob(filepath.Join(model, "*.safetensors"))
	if err != nil || len(files) == 0 {
		t.Fatalf("%s: no safetensors files (%v)", model, err)
	}
	var n int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += st.Size()
	}
	return n
}

// benchMedian is the median of f over runs.
func benchMedian(runs []benchPhase, f func(benchPhase) float64) float64 {
	var xs []float64
	for _, r := range runs {
		xs = append(xs, f(r))
	}
	return median(xs)
}

// gpuMemRow is one model of bench-browser-memory: what the GPU holds
// (the first run's; it does not vary), against the first model's, and the
// medians of the timings.
type gpuMemRow struct {
	Model        string                   `json:"model"`
	FileBytes    int64                    `json:"fileBytes"`
	GPU          engine.GPUMemoryUse      `json:"gpuMemory"`
	WeightsRatio float64                  `json:"weightsRatio"` // GPU weights ÷ the first model's
	BytesRatio   float64                  `json:"bytesRatio"`   // GPU buffers ÷ the first model's
	PeakRSS      int64                    `json:"peakRendererPlusGPURSS"`
	PeakGPURSS   int64                    `json:"peakGPUProcessRSS"`
	LoadMs       float64                  `json:"loadMs"`
	TTFTMs       float64                  `json:"ttftMs"`
	DecodeTokS   float64                  `json:"decodeTokPerS"`
	PromptTokens int                      `json:"promptTokens"`
	RanOn        string                   `json:"ranOn"`
	Runs         []benchPhase             `json:"runs"`
	ExpertCache  *engine.ExpertCacheStats `json:"expertCache,omitempty"`
}

// TestBrowserBenchGPUMemory is `make bench-browser-memory`: the GPU
// memory tessera's WebGPU runner holds in headless Chromium
// (info().gpuMemory: every buffer, and the weights, state and scratch in
// them) for each model of BENCH_GPU_MODELS (directories or GGUF files,
// relative to the repository root or absolute;
// the Makefile gives k3-mini BF16 and llama.cpp's Q4_K_M and MXFP4_MOE
// mixes of it), each against the first, with the browser's peak memory
// (renderer + GPU process, /proc) and the load, TTFT and decode speed of a
// short greedy generation. Table on stdout, JSON in $BENCH_OUT
// (out/bench/browser-memory.json). A benchmark: TESSERA_BENCH_BROWSER=1.
func TestBrowserBenchGPUMemory(t *testing.T) {
	s := newBenchGPUSetup(t)
	models := strings.Split(os.Getenv("BENCH_GPU_MODELS"), ",")
	if models[0] == "" {
		t.Fatal("BENCH_GPU_MODELS: give the models, the reference first (make bench-browser-memory)")
	}
	outPath := cmp.Or(os.Getenv("BENCH_OUT"), filepath.Join(s.root, "out", "bench", "browser-memory.json"))
	var rows []gpuMemRow
	for _, m := range models {
		m = s.path(strings.TrimSpace(m))
		row := gpuMemRow{Model: filepath.Base(m), FileBytes: benchFileBytes(t, m)}
		for r := range s.rounds {
			row.Runs = append(row.Runs, s.page(t, m, "", fmt.Sprintf("%s round %d", row.Model, r+1)))
		}
		first := row.Runs[0]
		row.GPU, row.RanOn, row.ExpertCache, row.PromptTokens = *first.GPUMemory, first.RanOn, first.ExpertCache, first.PromptTokens
		row.PeakRSS = int64(benchMedian(row.Runs, func(p benchPhase) float64 { return float64(p.PeakRSS.Renderer + p.PeakRSS.GPU) }))
		row.PeakGPURSS = int64(benchMedian(row.Runs, func(p benchPhase) float64 { return float64(p.PeakRSS.GPU) }))
		row.LoadMs = benchMedian(row.Runs, func(p benchPhase) float64 { return p.LoadMs })
		row.TTFTMs = benchMedian(row.Runs, func(p benchPhase) float64 { return p.TTFTMs })
		row.DecodeTokS = benchMedian(row.Runs, func(p benchPhase) float64 { return p.DecodeTokS })
		if row.ExpertCache != nil {
			t.Errorf("%s streamed its experts without a budget: %+v", row.Model, *row.ExpertCache)
		}
		if row.GPU.Weights != row.GPU.ModelWeights {
			t.Errorf("%s: %s of its %s of weights resident without a budget", row.Model, bytesStr(row.GPU.Weights), bytesStr(row.GPU.ModelWeights))
		}
		row.WeightsRatio = float64(row.GPU.Weights) / float64(cmp.Or(firstWeights(rows), row.GPU.Weights))
		row.BytesRatio = float64(row.GPU.Bytes) / float64(cmp.Or(firstBytes(rows), row.GPU.Bytes))
		rows = append(rows, row)
	}
	s.settings("no GPU memory budget")
	doc := struct {
		Env  benchEnv    `json:"env"`
		Rows []gpuMemRow `json:"rows"`
	}{s.env, rows}
	benchWrite(t, outPath, doc, gpuMemTable(s.env, rows))
}

func firstWeights(rows []gpuMemRow) int64 {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].GPU.Weights
}

func firstBytes(rows []gpuMemRow) int64 {
	if len(rows) == 0 {
		return 0
	}
	return rows[0].GPU.Bytes
}

// gpuMemTable renders bench-browser-memory's rows as markdown.
func gpuMemTable(env benchEnv, rows []gpuMemRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, commit %s, %s (%d cores), load average %s → %s; %s; WebGPU adapter: %s\n", env.Date, env.Commit, env.CPU, env.Cores,
		env.LoadBefore, env.LoadAfter, env.Chromium, cmp.Or(env.Adapter, "as below"))
	fmt.Fprintf(&b, "prompt %q, %d greedy tokens, medians of %d run(s) (one cold load each); Chromium at about:blank: renderer %s + GPU process %s\n\n",
		env.Prompt, env.GenTokens, env.Rounds, bytesStr(env.BaselineRSS.Renderer), bytesStr(env.BaselineRSS.GPU))
	b.WriteString("| model | file | GPU buffers | weights on the GPU | state + scratch | weights ÷ first | buffers ÷ first | peak RSS renderer + GPU (GPU process) | load | TTFT (prompt tokens) | decode tok/s |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %.3f | %.3f | %s (%s) | %.1f s | %.1f s (%d) | %.2f |\n", r.Model, bytesStr(r.FileBytes),
			bytesStr(r.GPU.Bytes), bytesStr(r.GPU.Weights), bytesStr(r.GPU.State+r.GPU.Scratch), r.WeightsRatio, r.BytesRatio,
			bytesStr(r.PeakRSS), bytesStr(r.PeakGPURSS), r.LoadMs/1000, r.TTFTMs/1000, r.PromptTokens, r.DecodeTokS)
	}
	if len(rows) > 0 {
		fmt.Fprintf(&b, "\nran on: %s\n", rows[0].RanOn)
	}
	return b.String()
}

// expertRow is one budget of bench-browser-experts.
type expertRow struct {
	Budget      string              `json:"budget"`
	GPU         engine.GPUMemoryUse `json:"gpuMemory"`
	Slots       int                 `json:"slots"`
	Experts     int                 `json:"experts"`
	LoadMs      float64             `json:"loadMs"`
	TTFTMs      float64             `json:"ttftMs"`
	PrefillTokS float64             `json:"prefillTokPerS"`
	DecodeTokS  float64             `json:"decodeTokPerS"`
	// the expert cache over the decode steps (DecodeExpertCache) and
	// over the whole generation (ExpertCache), of the median-decode run
	HitRate             float64      `json:"decodeHitRate"`
	UploadBytesPerToken float64      `json:"decodeUploadBytesPerToken"`
	UploadMsPerToken    float64      `json:"decodeUploadMsPerToken"`
	GenHitRate          float64      `json:"generationHitRate"`
	PeakRSS             int64        `json:"peakRendererPlusGPURSS"`
	IDs                 string       `json:"ids"`
	Runs                []benchPhase `json:"runs"`
}

// TestBrowserBenchExperts is `make bench-browser-experts`: expert
// streaming in headless Chromium — BENCH_EXPERT_MODEL (k3-mini BF16 in
// the Makefile) on WebGPU with Tessera.load's gpuMemory at each of
// BENCH_EXPERT_BUDGETS (100%,50%,25% of the routed experts): GPU memory,
// load, TTFT, decode tok/s and, over the decode steps, the expert cache's
// hit rate, bytes and time uploaded per token (lastStats.decodeExpertCache).
// Every budget must give the first budget's greedy ids (streaming is
// exact). Table on stdout, JSON in $BENCH_OUT
// (out/bench/browser-experts.json). A benchmark: TESSERA_BENCH_BROWSER=1.
func TestBrowserBenchExperts(t *testing.T) {
	s := newBenchGPUSetup(t)
	model := os.Getenv("BENCH_EXPERT_MODEL")
	if model == "" {
		t.Fatal("BENCH_EXPERT_MODEL: give a MoE model (make bench-browser-experts)")
	}
	model = s.path(model)
	budgets := strings.Split(cmp.Or(os.Getenv("BENCH_EXPERT_BUDGETS"), "100%,50%,25%"), ",")
	outPath := cmp.Or(os.Getenv("BENCH_OUT"), filepath.Join(s.root, "out", "bench", "browser-experts.json"))
	var rows []expertRow
	var ref []int
	for _, budget := range budgets {
		row := expertRow{Budget: budget}
		for r := range s.rounds {
			row.Runs = append(row.Runs, s.page(t, model, budget, fmt.Sprintf("%s at %s round %d", filepath.Base(model), budget, r+1)))
		}
		row.GPU = *row.Runs[0].GPUMemory
		row.LoadMs = benchMedian(row.Runs, func(p benchPhase) float64 { return p.LoadMs })
		row.TTFTMs = benchMedian(row.Runs, func(p benchPhase) float64 { return p.TTFTMs })
		row.PrefillTokS = benchMedian(row.Runs, func(p benchPhase) float64 { return p.PrefillTokS })
		row.DecodeTokS = benchMedian(row.Runs, func(p benchPhase) float64 { return p.DecodeTokS })
		row.PeakRSS = int64(benchMedian(row.Runs, func(p benchPhase) float64 { return float64(p.PeakRSS.Renderer + p.PeakRSS.GPU) }))
		mid := slices.IndexFunc(row.Runs, func(p benchPhase) bool { return p.DecodeTokS == row.DecodeTokS })
		if mid < 0 {
			mid = 0
		}
		row.Slots, row.Experts, row.HitRate = row.GPU.ExpertSlots, row.GPU.Experts, 1
		if d := row.Runs[mid].DecodeExpertCache; d != nil {
			row.Slots, row.Experts, row.HitRate, row.UploadBytesPerToken = d.Slots, d.Experts, d.HitRate, d.UploadBytesPerToken
			if d.Tokens > 0 {
				row.UploadMsPerToken = d.UploadMs / float64(d.Tokens)
			}
		}
		row.GenHitRate = 1
		if g := row.Runs[mid].ExpertCache; g != nil {
			row.GenHitRate = g.HitRate
		}
		row.IDs = "same as " + budgets[0]
		for _, ph := range row.Runs {
			if ref == nil {
				ref = ph.IDs
			}
			if !slices.Equal(ph.IDs, ref) {
				row.IDs = fmt.Sprintf("differ from %s at token %d", budgets[0], benchFirstDiff(ph.IDs, ref))
				t.Errorf("%s at %s: greedy ids %v, at %s %v", model, budget, ph.IDs, budgets[0], ref)
			}
		}
		rows = append(rows, row)
	}
	s.settings("model " + filepath.Base(model) + ", Tessera.load gpuMemory per row")
	doc := struct {
		Env   benchEnv    `json:"env"`
		Model string      `json:"model"`
		Rows  []expertRow `json:"rows"`
	}{s.env, model, rows}
	benchWrite(t, outPath, doc, expertTable(s.env, model, rows))
}

// expertTable renders bench-browser-experts' rows as markdown.
func expertTable(env benchEnv, model string, rows []expertRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, commit %s, %s (%d cores), load average %s → %s; %s\n", env.Date, env.Commit, env.CPU, env.Cores,
		env.LoadBefore, env.LoadAfter, env.Chromium)
	fmt.Fprintf(&b, "%s on WebGPU (%s), prompt %q (%d tokens), %d greedy tokens, medians of %d run(s) (one cold load each)\n\n",
		filepath.Base(model), env.Adapter, env.Prompt, env.PromptTokens, env.GenTokens, env.Rounds)
	b.WriteString("| gpuMemory | GPU buffers | experts on the GPU | load | TTFT | prefill tok/s | decode tok/s | hit rate (decode) | uploaded / token | upload time / token | hit rate (whole generation) | peak RSS | ids |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %d / %d | %.1f s | %.1f s | %.2f | %.3f | %.1f %% | %s | %.0f ms | %.1f %% | %s | %s |\n", r.Budget,
			bytesStr(r.GPU.Bytes), r.Slots, r.Experts, r.LoadMs/1000, r.TTFTMs/1000, r.PrefillTokS, r.DecodeTokS, 100*r.HitRate,
			bytesStr(int64(r.UploadBytesPerToken)), r.UploadMsPerToken, 100*r.GenHitRate, bytesStr(r.PeakRSS), r.IDs)
	}
	return b.String()
}
