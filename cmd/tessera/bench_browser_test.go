package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/tessera-llm/tessera/cmd/internal/host"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// The browser benchmark's defaults: a KJV passage k3-micro continues
// without an end-of-sequence token, 64 tokens with its tokenizer.
const (
	benchPrompt = "In the beginning God created the heaven and the earth. And the earth was without form, and void; " +
		"and darkness was upon the face of the deep. And the Spirit of God moved upon the face of the waters. " +
		"And God said, Let there be light: and there was light. And God saw the light"
	benchPromptTokens = 64
	benchGenTokens    = 64
	wllamaDirName     = "wllama-3.8.1" // scripts/peers/fetch-wllama.sh
)

// benchVariant is one runtime on one path: tessera's backend "gpu"
// (forced WebGPU), "auto" (what its load chooses) or "cpu"; wllama's
// default (WebGPU offload when ggml-webgpu takes the adapter) or "cpu"
// (n_gpu_layers 0). Threads is wllama's n_threads; 0 leaves its default
// (half of navigator.hardwareConcurrency, at least 1). Shared is
// tessera's shared option: the page's BENCH_INSTANCES instances share one
// engine.
type benchVariant struct {
	Runtime, Backend string
	Threads          int
	Shared           bool
}

func (v benchVariant) String() string {
	path := map[string]string{"gpu": "WebGPU", "cpu": "wasm CPU", "auto": "auto"}[v.Backend]
	if v.Runtime == "wllama" && v.Backend == "cpu" {
		switch v.Threads {
		case 0:
			path += ", default threads"
		case 1:
			path += ", 1 thread"
		default:
			path += fmt.Sprintf(", %d threads", v.Threads)
		}
	}
	if v.Shared {
		path += ", shared engine"
	}
	return v.Runtime + " " + path
}

// name is the variant's BENCH_ONLY name: runtime-backend, with -Nt for a
// thread count set.
func (v benchVariant) name() string {
	n := v.Runtime + "-" + v.Backend
	if v.Threads > 0 {
		n += fmt.Sprintf("-%dt", v.Threads)
	}
	if v.Shared {
		n += "-shared"
	}
	return n
}

// benchVariants are the pages of one round: each runtime's WebGPU path
// and wasm CPU path as a user gets them by default, tessera's auto, and
// wllama's multi-threaded build on every core when there is more than one
// (its default takes half of them); with more than one instance a page
// (BENCH_INSTANCES), tessera's CPU path with its instances sharing one
// engine as well.
func benchVariants(cores, instances int) []benchVariant {
	vs := []benchVariant{{"tessera", "gpu", 0, false}, {"wllama", "gpu", 0, false}, {"tessera", "auto", 0, false}, {"tessera", "cpu", 0, false}, {"wllama", "cpu", 0, false}}
	if cores > 1 {
		vs = append(vs, benchVariant{"wllama", "cpu", cores, false})
	}
	if instances > 1 {
		vs = append(vs, benchVariant{"tessera", "cpu", 0, true})
	}
	return vs
}

// benchPage is what scripts/browser/bench/bench.js reports for one page load.
type benchPage struct {
	OK           bool    `json:"ok"`
	Error        string  `json:"error"`
	Runtime      string  `json:"runtime"`
	Backend      string  `json:"backend"`
	Phase        string  `json:"phase"`
	Isolated     bool    `json:"crossOriginIsolated"`
	LoadMs       float64 `json:"loadMs"`
	TTFTMs       float64 `json:"ttftMs"`
	DecodeMs     float64 `json:"decodeMs"`
	PromptTokens int     `json:"promptTokens"`
	IDs          []int   `json:"ids"`
	RanOn        string  `json:"ranOn"`
	// MoreLoadMs: the loads of the instances after the first (instances=).
	MoreLoadMs  []float64 `json:"moreLoadMs,omitempty"`
	JSHeapBytes int64     `json:"jsHeapBytes"`
	Adapter     struct {
		Available    bool     `json:"available"`
		Reason       string   `json:"reason"`
		Vendor       string   `json:"vendor"`
		Architecture string   `json:"architecture"`
		Description  string   `json:"description"`
		Fallback     bool     `json:"fallback"`
		Features     []string `json:"features"`
	} `json:"adapter"`
	Engine json.RawMessage `json:"engine"`
	Log    []string        `json:"log,omitempty"`
	// Check: with BENCH_CHECK=1, Tessera.check's decode estimate for the
	// model on this page, taken after the run.
	Check *struct {
		DecodeTokS float64 `json:"decodeTokPerSec"`
		RanOn      string  `json:"ranOn"`
		Ms         float64 `json:"ms"`
		Bytes      int64   `json:"bytesFetched"`
		Error      string  `json:"error"`
	} `json:"check,omitempty"`
	// tessera's info().gpuMemory after the load, and its generation's
	// expert cache (whole, decode steps) when experts stream.
	GPUMemory         *engine.GPUMemoryUse     `json:"gpuMemory,omitempty"`
	HeapBytes         int64                    `json:"heapBytes,omitempty"` // tessera's info().heapBytes: its WebAssembly memory
	ExpertCache       *engine.ExpertCacheStats `json:"expertCache,omitempty"`
	DecodeExpertCache *engine.ExpertCacheStats `json:"decodeExpertCache,omitempty"`
}

// benchPhase is one page load measured: the page's report plus what the
// server and /proc saw.
type benchPhase struct {
	benchPage
	PrefillTokS float64 `json:"prefillTokPerS"` // prompt tokens / TTFT
	DecodeTokS  float64 `json:"decodeTokPerS"`  // (tokens - 1) / (last token - first token)
	Bytes       int64   `json:"bytesTransferred"`
	Requests    int     `json:"requests"`
	PeakRSS     rssPeak `json:"peakRSS"`
	// LoadedRSS: renderer + GPU process resident memory when the page
	// said every instance was loaded and had generated (bench.js's
	// loaded(), before it disposes them); 0 when it did not say.
	LoadedRSS int64 `json:"loadedRSS"`
}

// benchSite serves bench pages on loopback: a mux's handlers plus
// scripts/browser/bench's page and its report endpoint, every response
// cross-origin isolated (benchIsolate) and its body bytes counted.
type benchSite struct {
	addr     string
	sent     atomic.Int64
	requests atomic.Int64
	reports  chan benchPage
	pid      atomic.Int64 // the browser whose page runs (load), for /__bench/loaded
	loaded   atomic.Int64 // its renderer + GPU RSS at the page's /__bench/loaded
	log      *syncBuffer  // the tessera server's log, shown when a page fails
	close    func()
}

// newBenchSite starts a benchSite over mux, closed when t ends.
func newBenchSite(t *testing.T, mux *http.ServeMux, log *syncBuffer) *benchSite {
	t.Helper()
	bench, err := filepath.Abs("../../scripts/browser/bench")
	if err != nil {
		t.Fatal(err)
	}
	s := &benchSite{reports: make(chan benchPage, 1), log: log}
	mux.HandleFunc("POST /__bench/report", func(w http.ResponseWriter, r *http.Request) {
		var rep benchPage
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&rep); err != nil {
			rep = benchPage{Error: "bad report: " + err.Error()}
		}
		s.reports <- rep
	})
	mux.HandleFunc("POST /__bench/loaded", func(w http.ResponseWriter, r *http.Request) {
		if pid := s.pid.Load(); pid != 0 {
			now := benchRSSNow(int(pid))
			s.loaded.Store(now.Renderer + now.GPU)
		}
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/bench.html", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(bench, "bench.html")) })
	mux.HandleFunc("/bench.js", func(w http.ResponseWriter, r *http.Request) { http.ServeFile(w, r, filepath.Join(bench, "bench.js")) })
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	link, err := benchNewLink(os.Getenv("BENCH_MBITS"))
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(benchCount(benchLimit(benchIsolate(mux), link), &s.sent, &s.requests))
	go hs.Serve(ln)
	s.addr, s.close = ln.Addr().String(), func() { hs.Close() }
	t.Cleanup(s.close)
	return s
}

// load opens the bench page with query q (runtime, backend, prompt, max,
// …) in b's page, waits up to timeout for its report and returns it with
// the bytes sent and the browser's peak memory meanwhile; a failed page
// fails t, naming what.
func (s *benchSite) load(t *testing.T, b *browser, page string, q url.Values, what string, timeout time.Duration) benchPhase {
	t.Helper()
	q.Set("report", "/__bench/report")
	s.sent.Store(0)
	s.requests.Store(0)
	s.loaded.Store(0)
	s.pid.Store(int64(b.cmd.Process.Pid))
	peak := make(chan rssPeak, 1)
	stop := make(chan struct{})
	go func() { peak <- benchSampleRSS(b.cmd.Process.Pid, stop) }()
	sampling := true
	defer func() {
		if sampling { // a check failed before the sampler was stopped
			close(stop)
		}
	}()
	if _, err := b.call(page, "Page.navigate", map[string]any{"url": "http://" + s.addr + "/bench.html?" + q.Encode()}); err != nil {
		t.Fatal(err)
	}
	var rep benchPage
	select {
	case rep = <-s.reports:
	case err := <-b.died:
		t.Fatalf("%s: chromium exited: %v\n%s", what, err, e2eTail(b.stderr.String(), 3000))
	case <-time.After(timeout):
		t.Fatalf("%s: no report after %v\nconsole:\n%s", what, timeout, b.consoleText())
	}
	close(stop)
	sampling = false
	ph := benchPhase{benchPage: rep, Bytes: s.sent.Load(), Requests: int(s.requests.Load()), PeakRSS: <-peak, LoadedRSS: s.loaded.Load()}
	if !rep.OK {
		t.Fatalf("%s: the page failed: %s\nconsole:\n%s\nserver log:\n%s", what, rep.Error, b.consoleText(), s.log.String())
	}
	if rep.TTFTMs > 0 {
		ph.PrefillTokS = float64(rep.PromptTokens) / rep.TTFTMs * 1000
	}
	if len(rep.IDs) > 1 && rep.DecodeMs > 0 {
		ph.DecodeTokS = float64(len(rep.IDs)-1) / rep.DecodeMs * 1000
	}
	return ph
}

// rssPeak is the largest resident set seen while a page ran, summed over
// Chromium's processes of each kind (the page's workers live in the
// renderer; WebGPU buffers of a software adapter in the GPU process),
// and the CPU time the processes of each kind used meanwhile (a software
// adapter's shader compiles and kernels run in the GPU process; CPU time
// moves less with the machine's load than wall time).
type rssPeak struct {
	Renderer int64 `json:"renderer"`
	GPU      int64 `json:"gpu"`
	All      int64 `json:"all"`

	RendererCPUMs float64 `json:"rendererCpuMs,omitempty"`
	GPUCPUMs      float64 `json:"gpuCpuMs,omitempty"`
}

// benchRow is the medians of one model × variant over the rounds.
type benchRow struct {
	Model     string `json:"model"`
	Format    string `json:"format"` // BENCH_FORMAT
	Runtime   string `json:"runtime"`
	Backend   string `json:"backend"`
	Threads   int    `json:"threads,omitempty"` // wllama's n_threads when set
	Shared    bool   `json:"shared,omitempty"`  // tessera's instances share one engine
	Instances int    `json:"instances"`         // runtime instances each page loads (BENCH_INSTANCES)
	// LoadMoreMs: the median load time of the instances after the first
	// (cold, warm), with BENCH_INSTANCES > 1.
	LoadMoreColdMs float64 `json:"loadMoreColdMs,omitempty"`
	LoadMoreWarmMs float64 `json:"loadMoreWarmMs,omitempty"`
	RanOn          string  `json:"ranOn"`
	Note           string  `json:"note,omitempty"`
	LoadColdMs     float64 `json:"loadColdMs"`
	LoadWarmMs     float64 `json:"loadWarmMs"`
	TTFTMs         float64 `json:"ttftMs"`
	PrefillTokS    float64 `json:"prefillTokPerS"`
	DecodeTokS     float64 `json:"decodeTokPerS"`
	BytesCold      int64   `json:"bytesCold"`
	BytesWarm      int64   `json:"bytesWarm"`
	PeakRSS        int64   `json:"peakRendererPlusGPURSS"`
	LoadedRSS      int64   `json:"loadedRendererPlusGPURSS"` // benchPhase.LoadedRSS
	IDsMatch       string  `json:"ids"`
	// EstimateTokS: the median of Tessera.check's decode estimates
	// (BENCH_CHECK=1), to set beside DecodeTokS.
	EstimateTokS float64 `json:"estimateTokPerS,omitempty"`
	// Runs: every page load, round by round (cold, warm).
	Runs []benchPhase `json:"runs"`
}

// TestBrowserBenchVsWllama is `make bench-browser`: tessera against wllama
// (llama.cpp compiled to wasm, npm @wllama/wllama 3.8.1, fetched by make
// fetch-wllama) in the same headless Chromium, same model (wllama reads
// the F16 GGUF `tessera export` writes from the same safetensors, with the
// model's byte-level BPE vocabulary), on WebGPU and on the wasm CPU path.
// Each round opens every runtime × path in a fresh browser profile (cold
// load: download, compile, upload) and again in that profile (warm load
// from the caches), alternating the runtimes; each load generates
// BENCH_TOKENS greedy tokens from a BENCH_PROMPT_TOKENS-token prompt.
// Medians over BENCH_ROUNDS rounds go to out/bench/browser.json
// ($BENCH_OUT) and a markdown table to stdout. tessera's ids must equal
// `tessera run --backend cpu`; wllama's are compared and reported. A
// benchmark, not a test: it runs only with TESSERA_BENCH_BROWSER=1.
func TestBrowserBenchVsWllama(t *testing.T) {
	if os.Getenv("TESSERA_BENCH_BROWSER") != "1" {
		t.Skip("the browser benchmark runs with TESSERA_BENCH_BROWSER=1 (make bench-browser)")
	}
	chrome := findChromium()
	if chrome == "" {
		t.Fatal("no Chromium (/usr/lib/chromium/chromium or $TESSERA_CHROMIUM); install it with scripts/setup.sh browser")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	cache := os.Getenv("TESSERA_PEER_CACHE")
	if cache == "" {
		cache = filepath.Join(root, "testdata", "peers", "cache")
	}
	wllamaDir := filepath.Join(cache, wllamaDirName)
	for _, f := range []string{"index.js", "wllama.wasm"} {
		if _, err := os.Stat(filepath.Join(wllamaDir, f)); err != nil {
			t.Fatalf("wllama is not fetched (%v): run make fetch-wllama", err)
		}
	}
	rounds := benchEnvInt(t, "BENCH_ROUNDS", 3)
	promptTok := benchEnvInt(t, "BENCH_PROMPT_TOKENS", benchPromptTokens)
	genTok := benchEnvInt(t, "BENCH_TOKENS", benchGenTokens)
	prompt := cmp.Or(os.Getenv("BENCH_PROMPT"), benchPrompt)
	var models []string
	for _, m := range strings.Split(cmp.Or(os.Getenv("BENCH_MODELS"), "k3-micro"), ",") {
		if m = strings.TrimSpace(m); m != "" {
			models = append(models, m)
		}
	}
	// BENCH_FORMAT: "safetensors" (tessera reads the model directory's
	// safetensors, wllama their F16 GGUF export), or a GGUF type both
	// runtimes read the same file of: f16 (tessera export) or q8_0, q4_0,
	// q4_k, mxfp4 (tessera quantize).
	format := cmp.Or(os.Getenv("BENCH_FORMAT"), "safetensors")
	if !slices.Contains([]string{"safetensors", "f16", "q8_0", "q4_0", "q4_k", "mxfp4"}, format) {
		t.Fatalf("BENCH_FORMAT=%q: want safetensors, f16, q8_0, q4_0, q4_k or mxfp4", format)
	}
	outPath := cmp.Or(os.Getenv("BENCH_OUT"), filepath.Join(root, "out", "bench", "browser.json"))
	loadBefore := host.LoadAvg()
	start := time.Now()
	dir := t.TempDir()

	// The bundles `make wasm` builds (with the WebGPU runner, and the
	// CPU-only one backend 'cpu' loads): what the page serves.
	wasmDir := filepath.Join(dir, "wasm")
	e2eBuildBundle(t, wasmDir)
	e2eBuildCPUBundle(t, wasmDir)

	// wllama's files as tessera serve serves its own: revalidated on every
	// load (no-cache + ETag), gzip -9 when the browser accepts it.
	wllamaFiles := benchStatic(t, wllamaDir, "index.js", "wllama.wasm")

	// BENCH_INSTANCES: runtime instances a page loads, as that many tabs
	// of an app would (each its own engine, but for the shared variant)
	instances := benchEnvInt(t, "BENCH_INSTANCES", 1)
	variants := benchVariants(runtime.NumCPU(), instances)
	if only := os.Getenv("BENCH_ONLY"); only != "" { // e.g. "wllama-cpu,tessera-cpu"
		var names []string
		for _, v := range variants {
			names = append(names, v.name())
		}
		variants = slices.DeleteFunc(variants, func(v benchVariant) bool {
			return !slices.Contains(strings.Split(only, ","), v.name())
		})
		if len(variants) == 0 {
			t.Fatalf("BENCH_ONLY=%q selects nothing: use the names %s", only, strings.Join(names, ","))
		}
	}
	var rows []benchRow
	var env benchEnv
	for mi, name := range models {
		modelDir := name
		if !strings.ContainsRune(name, '/') {
			modelDir = filepath.Join(root, "models", name)
		}
		if _, err := os.Stat(filepath.Join(modelDir, "tokenizer.json")); err != nil {
			t.Fatalf("BENCH_MODELS %s: %v; wllama takes text, so the model needs its tokenizer.json (a byte-level BPE the GGUF export maps)", name, err)
		}
		// What tessera feeds the model and generates natively.
		promptIDs := e2eParseIDs(t, strings.ReplaceAll(e2eRun(t, "tokenize", "--tokenizer", filepath.Join(modelDir, "tokenizer.json"), "--text", prompt), ",", " "))
		if len(promptIDs) != promptTok {
			t.Fatalf("the prompt is %d tokens with %s's tokenizer, want %d (BENCH_PROMPT_TOKENS)", len(promptIDs), name, promptTok)
		}
		// wllama's GGUF (BENCH_FORMAT, also tessera's model unless it is
		// "safetensors") in a directory of its own, served as model.gguf.
		gdir := filepath.Join(dir, fmt.Sprintf("gguf%d", mi))
		if err := os.MkdirAll(gdir, 0o755); err != nil {
			t.Fatal(err)
		}
		gguf := filepath.Join(gdir, "model.gguf")
		if format == "safetensors" || format == "f16" {
			e2eRun(t, "export", "--model", modelDir, "--out", gguf, "--type", "f16")
		} else {
			e2eRun(t, "quantize", "--model", modelDir, "--out", gguf, "--type", format)
		}
		tesseraModel, nativeModel := "", modelDir // the page's default model: the safetensors directory
		if format != "safetensors" {
			e2eRun(t, "manifest", "--model", gguf)
			tesseraModel, nativeModel = "/gguf/model.gguf", gguf
		}
		// a block format runs the integer path: natively with the generic
		// kernels, whose float32 additions the browser's CPU path makes in
		// the same order
		if format != "safetensors" && format != "f16" {
			t.Setenv(engine.Int8KernelsEnv, "go")
		}
		nativeRun := func(bias string) []int {
			return e2eParseIDs(t, e2eRun(t, "run", "--backend", "cpu", "--model", nativeModel, "--prompt", prompt,
				"--max-tokens", strconv.Itoa(genTok), "--ids", "--logit-bias", bias))
		}
		native := nativeRun("")
		// wllama 3.8.1 fails a completion whose streamed text is not valid
		// UTF-8 (its JSON glue throws "invalid UTF-8 byte", and the reply
		// then reads "Invalid magic number"). A random-weight model's greedy
		// output can hold a byte token that is not a character on its own:
		// such a model runs with those tokens banned, in both runtimes.
		bias, banned := benchUTF8Bans(t, filepath.Join(modelDir, "tokenizer.json"), native)
		if bias != "" {
			native = nativeRun(bias)
			t.Logf("%s: its greedy output holds tokens that are not UTF-8 on their own; %d such tokens banned (logit bias) in both runtimes", name, banned)
		}
		if _, err := ref.SetInt8Kernels(ref.Int8Kernels()[0]); err != nil {
			t.Fatal(err)
		}
		if len(native) != genTok {
			t.Logf("note: natively %s stops after %d of %d tokens (end of sequence); both runtimes should too", name, len(native), genTok)
		}

		var logBuf syncBuffer
		srv, err := newServer(serveConfig{ModelDir: modelDir, WasmDir: wasmDir, Loopback: true, Log: &logBuf})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		mux := http.NewServeMux()
		mux.Handle("/wllama/", wllamaFiles)
		mux.Handle("/gguf/", http.StripPrefix("/gguf/", http.FileServer(http.Dir(gdir))))
		mux.Handle("/", srv)
		site := newBenchSite(t, mux, &logBuf)

		// one page load in browser b
		load := func(b *browser, page string, v benchVariant, phase string) benchPhase {
			t.Helper()
			q := url.Values{"runtime": {v.Runtime}, "backend": {v.Backend}, "prompt": {prompt}, "max": {strconv.Itoa(genTok)}, "phase": {phase}}
			if tesseraModel != "" && v.Runtime == "tessera" {
				q.Set("model", tesseraModel)
			}
			if v.Threads > 0 {
				q.Set("threads", strconv.Itoa(v.Threads))
			}
			if instances > 1 {
				q.Set("instances", strconv.Itoa(instances))
			}
			if v.Shared {
				q.Set("shared", "1")
			}
			if bias != "" {
				q.Set("bias", bias)
			}
			if os.Getenv("BENCH_CHECK") == "1" && v.Runtime == "tessera" {
				q.Set("check", "1")
			}
			return site.load(t, b, page, q, v.String()+" "+phase, 5*time.Minute)
		}

		runs := map[benchVariant][]benchPhase{}
		for r := range rounds {
			for vi, v := range variants {
				// a fresh profile; short: Chromium's socket path has a length limit
				b, page, closeB := benchBrowser(t, chrome, filepath.Join(dir, fmt.Sprintf("b%d%d%d", mi, r, vi)), &env)
				cold := load(b, page, v, "cold")
				warm := load(b, page, v, "warm")
				closeB()
				runs[v] = append(runs[v], cold, warm)
				t.Logf("%s round %d %s: load %.0f / %.0f ms, TTFT %.0f ms, decode %.1f tok/s, on %s; CPU renderer %.1f / %.1f s, GPU process %.1f / %.1f s",
					name, r+1, v, cold.LoadMs, warm.LoadMs, warm.TTFTMs, warm.DecodeTokS, warm.RanOn,
					cold.PeakRSS.RendererCPUMs/1000, warm.PeakRSS.RendererCPUMs/1000, cold.PeakRSS.GPUCPUMs/1000, warm.PeakRSS.GPUCPUMs/1000)
			}
		}
		site.close()

		// tessera's ids equal native ids; wllama's are compared with them.
		for _, v := range variants {
			row := benchRow{Model: filepath.Base(modelDir), Format: format, Runtime: v.Runtime, Backend: v.Backend, Threads: v.Threads, Shared: v.Shared, Instances: instances, Runs: runs[v]}
			var cold, warm, ttft, prefill, decode, rss, held, estimate []float64
			var bcold, bwarm, mcold, mwarm []float64
			row.IDsMatch = "same as native"
			for i, ph := range runs[v] {
				if i%2 == 0 {
					cold = append(cold, ph.LoadMs)
					bcold = append(bcold, float64(ph.Bytes))
					mcold = append(mcold, ph.MoreLoadMs...)
				} else {
					warm = append(warm, ph.LoadMs)
					bwarm = append(bwarm, float64(ph.Bytes))
					mwarm = append(mwarm, ph.MoreLoadMs...)
				}
				if len(ph.MoreLoadMs) != instances-1 {
					t.Errorf("%s %s: %d further instances loaded, want %d", v, ph.Phase, len(ph.MoreLoadMs), instances-1)
				}
				ttft = append(ttft, ph.TTFTMs)
				prefill = append(prefill, ph.PrefillTokS)
				decode = append(decode, ph.DecodeTokS)
				if c := ph.Check; c != nil {
					if c.Error != "" {
						t.Errorf("%s %s: Tessera.check: %s", v, ph.Phase, c.Error)
					} else {
						estimate = append(estimate, c.DecodeTokS)
						t.Logf("%s %s: Tessera.check took %.0f ms, fetched %d bytes", v, ph.Phase, c.Ms, c.Bytes)
					}
				}
				rss = append(rss, float64(ph.PeakRSS.Renderer+ph.PeakRSS.GPU))
				held = append(held, float64(ph.LoadedRSS))
				row.RanOn = ph.RanOn
				if ph.PromptTokens != len(promptIDs) {
					msg := fmt.Sprintf("%s read the prompt as %d tokens, tessera's tokenizer gives %d", v, ph.PromptTokens, len(promptIDs))
					if v.Runtime == "tessera" {
						t.Error(msg)
					} else {
						t.Log("note: " + msg)
					}
				}
				if !slices.Equal(ph.IDs, native) {
					at := benchFirstDiff(ph.IDs, native)
					row.IDsMatch = fmt.Sprintf("differ from native at token %d of %d", at, len(native))
					// block formats: reported, not failed. The browser's integer
					// path gives the native generic kernels' bits (core/ref's
					// TestSIMD128Int8MatchesGeneric; the page's ids equal a
					// -tags purego native run's), but native amd64 runs SiTU's
					// GLU in an AVX-512 float32 kernel (gluVec, act_amd64.go),
					// not the generic float64 one the browser runs, and a near
					// tie can pick another token (q8_0 token 2: 1207 natively,
					// 1108 in the browser and with purego or gluGeneric).
					if v.Runtime == "tessera" && (format == "safetensors" || format == "f16") {
						t.Errorf("%s %s: greedy ids %v\nnative tessera run ids %v", v, ph.Phase, ph.IDs, native)
					}
				}
			}
			if bias != "" {
				row.Note = fmt.Sprintf("the %d tokens that are not UTF-8 on their own banned (logit bias) in both runtimes: wllama 3.8.1 fails on such text", banned)
			}
			if v.Runtime == "wllama" && v.Backend == "gpu" && !strings.HasPrefix(row.RanOn, "gpu") {
				row.Note = strings.TrimPrefix(row.Note+"; wllama's WebGPU backend did not take the model; it ran on the CPU", "; ")
				if a := runs[v][0].Adapter; !a.Available {
					row.Note += " (no WebGPU adapter: " + a.Reason + ")"
				} else if !slices.Contains(a.Features, "shader-f16") {
					row.Note += fmt.Sprintf(" (llama.cpp's load log shows CPU model buffers only; the adapter, %s %s, lacks shader-f16, which ggml-webgpu requires of its device; tessera's WGSL does not need it)", a.Vendor, a.Architecture)
				}
			}
			if a := runs[v][0].Adapter; v.Backend == "gpu" && env.Adapter == "" && a.Available {
				env.Adapter = fmt.Sprintf("%s %s (%s), fallback %v, shader-f16 %v", a.Vendor, a.Architecture, a.Description, a.Fallback,
					slices.Contains(a.Features, "shader-f16"))
				env.AdapterFeatures = a.Features
			}
			row.LoadColdMs, row.LoadWarmMs = median(cold), median(warm)
			if instances > 1 {
				row.LoadMoreColdMs, row.LoadMoreWarmMs = median(mcold), median(mwarm)
			}
			row.TTFTMs, row.PrefillTokS, row.DecodeTokS = median(ttft), median(prefill), median(decode)
			row.BytesCold, row.BytesWarm, row.PeakRSS = int64(median(bcold)), int64(median(bwarm)), int64(median(rss))
			row.LoadedRSS = int64(median(held))
			if len(estimate) > 0 {
				row.EstimateTokS = median(estimate)
				t.Logf("%s %s: Tessera.check estimated decode at %.1f tok/s (median of %d), measured %.1f tok/s: %.2f×",
					name, v, row.EstimateTokS, len(estimate), row.DecodeTokS, row.EstimateTokS/row.DecodeTokS)
			}
			rows = append(rows, row)
		}
	}

	env.finish(root, loadBefore)
	env.Rounds, env.Prompt, env.PromptTokens, env.GenTokens = rounds, prompt, promptTok, genTok
	if v := os.Getenv("BENCH_MBITS"); v != "" {
		env.Link = "a " + v + " Mbit/s link (BENCH_MBITS) shared by every download"
	}
	env.Settings = "greedy (temperature 0); model format " + format + "; tessera: Tessera.load backend gpu|auto|cpu, default make wasm bundle; " +
		"wllama 3.8.1: the GGUF of BENCH_FORMAT (F16 from tessera export for safetensors), n_threads its default (half the cores) or as the row says, n_ctx 1024, n_gpu_layers 0 on the CPU path (its default on WebGPU), " +
		"logprobs 1 (its stream carries the ids only with them), other settings its defaults; pages cross-origin isolated (COOP/COEP) unless BENCH_ISOLATE=0"
	doc := struct {
		Env  benchEnv   `json:"env"`
		Rows []benchRow `json:"rows"`
	}{env, rows}
	benchWrite(t, outPath, doc, benchTable(env, rows))
	t.Logf("wrote %s in %v", outPath, time.Since(start).Round(time.Second))
}

// benchUTF8Bans returns, when ids hold a token whose bytes are not valid
// UTF-8 on their own, --logit-bias banning every such token of the
// tokenizer (tokPath) and their number; else "" and 0.
func benchUTF8Bans(t *testing.T, tokPath string, ids []int) (string, int) {
	t.Helper()
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	valid := func(id int) bool {
		s, err := tok.Decode([]int{id})
		return err != nil || utf8.ValidString(s) // unassigned ids are never sampled
	}
	if !slices.ContainsFunc(ids, func(id int) bool { return !valid(id) }) {
		return "", 0
	}
	var bans []string
	for id := range tok.Vocab() {
		if !valid(id) {
			bans = append(bans, fmt.Sprintf("%d:-100", id))
		}
	}
	return strings.Join(bans, ","), len(bans)
}

// benchWrite writes doc as JSON to outPath and table next to it (.md),
// and prints the table.
func benchWrite(t *testing.T, outPath string, doc any, table string) {
	t.Helper()
	data, err := json.MarshalIndent(doc, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(outPath), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(outPath, append(data, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(strings.TrimSuffix(outPath, ".json")+".md", []byte(table), 0o644); err != nil {
		t.Fatal(err)
	}
	fmt.Print(table)
}

// benchBrowser starts Chromium with a fresh profile in dir and attaches a
// page, noting in env the browser's version and, the first time, its
// memory at about:blank. closeB ends it (also when t ends).
func benchBrowser(t *testing.T, chrome, dir string, env *benchEnv) (b *browser, page string, closeB func()) {
	t.Helper()
	b = startChromium(t, chrome, dir)
	var once sync.Once
	closeB = func() { once.Do(b.close) } // also when a check fails
	t.Cleanup(closeB)
	page, err := b.attachPage()
	if err != nil {
		t.Fatalf("%v\nchromium stderr:\n%s", err, e2eTail(b.stderr.String(), 3000))
	}
	if _, err := b.call(page, "Runtime.enable", nil); err != nil {
		t.Fatal(err)
	}
	if env.BaselineRSS.All == 0 { // Chromium at about:blank
		done := make(chan struct{})
		close(done)
		env.BaselineRSS = benchSampleRSS(b.cmd.Process.Pid, done)
	}
	if env.Chromium == "" {
		if res, err := b.call("", "Browser.getVersion", nil); err == nil {
			var ver struct{ Product string }
			json.Unmarshal(res, &ver)
			env.Chromium = ver.Product
		}
	}
	return b, page, closeB
}

// benchEnv records where and how the benchmark ran.
type benchEnv struct {
	Date            string   `json:"date"`
	Commit          string   `json:"commit"`
	CPU             string   `json:"cpu"`
	Cores           int      `json:"cores"`
	LoadBefore      string   `json:"loadavgBefore"`
	LoadAfter       string   `json:"loadavgAfter"`
	Chromium        string   `json:"chromium"`
	Adapter         string   `json:"adapter"`
	AdapterFeatures []string `json:"adapterFeatures"`
	// BaselineRSS: Chromium at about:blank, before the first page.
	BaselineRSS  rssPeak `json:"baselineRSS"`
	Rounds       int     `json:"rounds"`
	Prompt       string  `json:"prompt"`
	PromptTokens int     `json:"promptTokens"`
	GenTokens    int     `json:"genTokens"`
	Settings     string  `json:"settings"`
	// Link: the download link's speed (BENCH_MBITS), "loopback" without one.
	Link string `json:"link"`
}

// finish records the date, the machine, its load average before (given)
// and now, and root's commit.
func (env *benchEnv) finish(root, loadBefore string) {
	env.Date = time.Now().UTC().Format(time.RFC3339)
	env.LoadBefore, env.LoadAfter = loadBefore, host.LoadAvg()
	env.CPU = benchCPUName()
	env.Cores = runtime.NumCPU()
	if out, err := exec.Command("git", "-C", root, "rev-parse", "--short", "HEAD").Output(); err == nil {
		env.Commit = strings.TrimSpace(string(out))
	}
}

// benchTable renders the medians as markdown.
func benchTable(env benchEnv, rows []benchRow) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\n%s, %s (%d cores), load average %s → %s; %s; WebGPU adapter: %s; downloads over %s\n", env.Date, env.CPU, env.Cores,
		env.LoadBefore, env.LoadAfter, env.Chromium, cmp.Or(env.Adapter, "none"), cmp.Or(env.Link, "loopback"))
	fmt.Fprintf(&b, "prompt %d tokens, %d greedy tokens, medians of %d rounds (fresh profile per round; cold = first load, warm = reload); "+
		"Chromium at about:blank: renderer %s + GPU process %s\n\n",
		env.PromptTokens, env.GenTokens, env.Rounds, bytesStr(env.BaselineRSS.Renderer), bytesStr(env.BaselineRSS.GPU))
	b.WriteString("| model | runtime × path | ran on | load cold | load warm | TTFT | prefill tok/s | decode tok/s | RSS peak / loaded (renderer + GPU) | transferred cold / warm | ids |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %.2f s | %.2f s | %.0f ms | %.0f | %.1f | %s / %s | %s / %s | %s |\n", r.Model+" "+r.Format,
			benchVariant{r.Runtime, r.Backend, r.Threads, r.Shared}, r.RanOn, r.LoadColdMs/1000, r.LoadWarmMs/1000, r.TTFTMs, r.PrefillTokS, r.DecodeTokS,
			bytesStr(r.PeakRSS), bytesStr(r.LoadedRSS), bytesStr(r.BytesCold), bytesStr(r.BytesWarm), r.IDsMatch)
	}
	for _, r := range rows {
		if r.Instances > 1 {
			fmt.Fprintf(&b, "\n- %s %s: %d instances a page; each after the first loaded in %.2f s cold, %.2f s warm", r.Model,
				benchVariant{r.Runtime, r.Backend, r.Threads, r.Shared}, r.Instances, r.LoadMoreColdMs/1000, r.LoadMoreWarmMs/1000)
		}
	}
	for _, r := range rows {
		if r.Note != "" {
			fmt.Fprintf(&b, "\n- %s %s: %s", r.Model, benchVariant{r.Runtime, r.Backend, r.Threads, r.Shared}, r.Note)
		}
	}
	b.WriteString("\n")
	return b.String()
}

// benchStatic serves the named files of dir under /wllama/ as tessera
// serve serves its own (serveBody): Cache-Control no-cache, an ETag, and
// a gzip -9 copy for clients that accept it, made before the first page
// load so that no load waits for it.
func benchStatic(t *testing.T, dir string, names ...string) http.Handler {
	t.Helper()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	for _, n := range names {
		if _, err := root.Stat(n); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{started: time.Now()}
	s.warmGzip(root, "wllama", names...)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := strings.TrimPrefix(r.URL.Path, "/wllama/")
		f, st, ok := openRegular(root, n)
		if !ok || !slices.Contains(names, n) {
			if ok {
				f.Close()
			}
			http.NotFound(w, r)
			return
		}
		defer f.Close()
		h := w.Header()
		h.Set("Content-Type", contentType(n))
		h.Set("Cache-Control", "no-cache")
		s.serveBody(w, r, fileBody("wllama", n, f, st))
	})
}

// benchIsolate makes every response cross-origin isolated (COOP + COEP),
// as a page needs for wllama's multi-threaded build (here it runs one
// thread); BENCH_ISOLATE=0 leaves the headers out.
func benchIsolate(h http.Handler) http.Handler {
	if os.Getenv("BENCH_ISOLATE") == "0" {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cross-Origin-Opener-Policy", "same-origin")
		w.Header().Set("Cross-Origin-Embedder-Policy", "require-corp")
		h.ServeHTTP(w, r)
	})
}

// benchLink is a network link of a given speed that every response body
// the bench site sends crosses, all connections sharing it as a user's
// downloads share theirs (BENCH_MBITS): a cold load then includes the
// time a real download takes rather than loopback's.
type benchLink struct {
	mu    sync.Mutex
	rate  float64   // bytes a second
	free  time.Time // when the bytes sent so far have crossed the link
	now   func() time.Time
	sleep func(time.Duration)
}

// benchLinkSlack is how far behind the clock the link's schedule may fall
// and still be caught up: a sleep that overruns (they do, by up to a
// millisecond, against 2.6 ms per 64 KiB at 200 Mbit/s) costs the sender
// nothing, while a link left idle longer saves no capacity for later.
const benchLinkSlack = 20 * time.Millisecond

// benchNewLink parses BENCH_MBITS (megabits a second); "" is no limit.
func benchNewLink(mbits string) (*benchLink, error) {
	if mbits == "" {
		return nil, nil
	}
	v, err := strconv.ParseFloat(mbits, 64)
	if err != nil || !(v >= 1 && v <= 1e5) {
		return nil, fmt.Errorf("BENCH_MBITS=%q: want the link's speed in megabits a second, 1 to 100000", mbits)
	}
	return &benchLink{rate: v * 1e6 / 8, now: time.Now, sleep: time.Sleep}, nil
}

// send waits until n more bytes have crossed the link.
func (l *benchLink) send(n int) {
	l.mu.Lock()
	now := l.now()
	if behind := now.Add(-benchLinkSlack); l.free.Before(behind) {
		l.free = behind
	}
	l.free = l.free.Add(time.Duration(float64(n) / l.rate * float64(time.Second)))
	wait := l.free.Sub(now)
	l.mu.Unlock()
	if wait > 0 {
		l.sleep(wait)
	}
}

// benchLimit sends h's response bodies through link (nil: unlimited).
func benchLimit(h http.Handler, link *benchLink) http.Handler {
	if link == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(&linkWriter{ResponseWriter: w, link: link}, r)
	})
}

// linkWriter writes through a benchLink, 64 KiB at a time.
type linkWriter struct {
	http.ResponseWriter
	link *benchLink
}

func (w *linkWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		k := min(len(p), 64<<10)
		w.link.send(k)
		k, err := w.ResponseWriter.Write(p[:k])
		n += k
		if err != nil {
			return n, err
		}
		p = p[k:]
	}
	return n, nil
}

func (w *linkWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// benchCount adds the response body bytes h writes to n and counts requests
// (the report POSTs excluded).
func benchCount(h http.Handler, n, requests *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/__bench/report" {
			h.ServeHTTP(w, r)
			return
		}
		requests.Add(1)
		h.ServeHTTP(&countWriter{ResponseWriter: w, n: n}, r)
	})
}

// countWriter counts the bytes written through it.
type countWriter struct {
	http.ResponseWriter
	n *atomic.Int64
}

func (w *countWriter) Write(p []byte) (int, error) {
	k, err := w.ResponseWriter.Write(p)
	w.n.Add(int64(k))
	return k, err
}

func (w *countWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// benchSampleRSS samples, every 50 ms until stop, the resident set and
// CPU time of the processes in Chromium's process group (pgid) by kind,
// and returns the largest resident sums seen and the CPU time used from
// the first sample (a process started meanwhile: from its start) to the
// last.
func benchSampleRSS(pgid int, stop <-chan struct{}) rssPeak {
	var peak rssPeak
	type ticks struct {
		first, last int64
		kind        string
	}
	cpu := map[int]*ticks{}
	firstSample := true
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		var cur rssPeak
		benchProcs(pgid, func(pid int, kind string, rss, now int64) {
			cur.add(kind, rss)
			c := cpu[pid]
			if c == nil {
				c = &ticks{kind: kind}
				if firstSample {
					c.first = now
				}
				cpu[pid] = c
			}
			c.last = now
		})
		firstSample = false
		peak.Renderer = max(peak.Renderer, cur.Renderer)
		peak.GPU = max(peak.GPU, cur.GPU)
		peak.All = max(peak.All, cur.All)
		select {
		case <-stop:
			for _, c := range cpu {
				ms := float64(c.last-c.first) * 1000 / clockTicks
				switch c.kind {
				case "renderer":
					peak.RendererCPUMs += ms
				case "gpu":
					peak.GPUCPUMs += ms
				}
			}
			return peak
		case <-tick.C:
		}
	}
}

// add counts a process of kind ("renderer", "gpu" or "") resident rss bytes.
func (p *rssPeak) add(kind string, rss int64) {
	switch kind {
	case "renderer":
		p.Renderer += rss
	case "gpu":
		p.GPU += rss
	}
	p.All += rss
}

// benchRSSNow is the resident sums of Chromium's processes (pgid) by kind now.
func benchRSSNow(pgid int) rssPeak {
	var cur rssPeak
	benchProcs(pgid, func(_ int, kind string, rss, _ int64) {
		cur.add(kind, rss)
	})
	return cur
}

// benchProcs calls each for every process in process group pgid with its
// kind ("renderer", "gpu" or ""), resident set in bytes and CPU time so
// far in clock ticks.
func benchProcs(pgid int, each func(pid int, kind string, rss, ticks int64)) {
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		// fields after "comm)": state ppid pgrp … utime (12th) stime (13th)
		i := strings.LastIndexByte(string(stat), ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 13 || f[2] != strconv.Itoa(pgid) {
			continue
		}
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		kind := ""
		switch {
		case strings.Contains(string(cmdline), "--type=renderer"):
			kind = "renderer"
		case strings.Contains(string(cmdline), "--type=gpu-process"):
			kind = "gpu"
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		each(pid, kind, benchVmRSS(pid), ut+st)
	}
}

// clockTicks is the unit of /proc/PID/stat's CPU times (USER_HZ: 100 on
// Linux for every architecture Go supports there).
const clockTicks = 100

// benchVmRSS is VmRSS of /proc/pid/status in bytes (0 when gone).
func benchVmRSS(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// benchCPUName is the first "model name" of /proc/cpuinfo.
func benchCPUName() string {
	b, _ := os.ReadFile("/proc/cpuinfo")
	for _, l := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
			return strings.TrimSpace(v)
		}
	}
	return runtime.GOARCH
}

// benchFirstDiff is the first index where a and b differ.
func benchFirstDiff(a, b []int) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// benchEnvInt reads a positive integer setting.
func benchEnvInt(t *testing.T, name string, def int) int {
	t.Helper()
	s := os.Getenv(name)
	if s == "" {
		return def
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 {
		t.Fatalf("%s=%q: want a positive integer", name, s)
	}
	return n
}

// TestBenchHelpers checks the browser benchmark's plumbing without a
// browser: wllama's files are served gzip -9 to clients that accept it,
// plain otherwise, and revalidate with 304; the byte counter sees exactly
// the bodies; benchFirstDiff finds the first differing id; benchUTF8Bans
// bans the tokens that are not UTF-8 alone, only when the ids hold one;
// BENCH_MBITS's link holds a body to its speed and refuses bad speeds.
func TestBenchHelpers(t *testing.T) {
	dir := t.TempDir()
	wasm := bytes.Repeat([]byte("\x00asm wllama "), 4000)
	if err := os.WriteFile(filepath.Join(dir, "wllama.wasm"), wasm, 0o644); err != nil {
		t.Fatal(err)
	}
	var sent, requests atomic.Int64
	h := benchCount(benchIsolate(benchStatic(t, dir, "wllama.wasm")), &sent, &requests)
	get := func(path string, hdr map[string]string) *http.Response {
		r := httptest.NewRequest("GET", "http://127.0.0.1"+path, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		res := w.Result()
		res.ContentLength = int64(w.Body.Len())
		return res
	}
	plain := get("/wllama/wllama.wasm", nil)
	if plain.StatusCode != 200 || plain.Header.Get("Content-Encoding") != "" || plain.ContentLength != int64(len(wasm)) ||
		plain.Header.Get("Content-Type") != "application/wasm" || plain.Header.Get("Cache-Control") != "no-cache" ||
		plain.Header.Get("Cross-Origin-Embedder-Policy") != "require-corp" {
		t.Fatalf("plain GET: %d %v, %d bytes", plain.StatusCode, plain.Header, plain.ContentLength)
	}
	if sent.Load() != int64(len(wasm)) {
		t.Errorf("counted %d bytes, served %d", sent.Load(), len(wasm))
	}
	gz := get("/wllama/wllama.wasm", map[string]string{"Accept-Encoding": "gzip, deflate"})
	zr, err := gzip.NewReader(gz.Body)
	if err != nil || gz.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("gzip GET: %v %v", err, gz.Header)
	}
	if got, _ := io.ReadAll(zr); !bytes.Equal(got, wasm) || gz.ContentLength >= int64(len(wasm))/10 {
		t.Errorf("gzip body: %d bytes decoding to %d, want a small body decoding to the %d-byte file", gz.ContentLength, len(got), len(wasm))
	}
	again := get("/wllama/wllama.wasm", map[string]string{"Accept-Encoding": "gzip", "If-None-Match": gz.Header.Get("ETag")})
	if again.StatusCode != http.StatusNotModified || again.ContentLength != 0 {
		t.Errorf("revalidation: %d with %d bytes, want 304 and no body", again.StatusCode, again.ContentLength)
	}
	if missing := get("/wllama/nope.js", nil); missing.StatusCode != http.StatusNotFound {
		t.Errorf("unknown file: %d, want 404", missing.StatusCode)
	}
	if requests.Load() != 4 {
		t.Errorf("counted %d requests, want 4", requests.Load())
	}
	for _, c := range []struct {
		a, b []int
		want int
	}{{[]int{1, 2, 3}, []int{1, 2, 3}, 3}, {[]int{1, 5, 3}, []int{1, 2, 3}, 1}, {[]int{1, 2}, []int{1, 2, 3}, 2}, {nil, []int{4}, 0}} {
		if got := benchFirstDiff(c.a, c.b); got != c.want {
			t.Errorf("benchFirstDiff(%v, %v) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	// k3-micro's byte-level vocabulary: id 135 is the lone byte 0x87, not
	// UTF-8; the tokens of "And God said" are all valid
	tokPath := filepath.Join("..", "..", "models", "k3-micro", "tokenizer.json")
	if bias, n := benchUTF8Bans(t, tokPath, []int{1, 135}); n < 64 || !strings.Contains(","+bias+",", ",135:-100,") || strings.Count(bias, ":-100") != n {
		t.Errorf("benchUTF8Bans with id 135: %d bans %q, want every continuation byte (≥ 64) banned, 135 among them", n, bias)
	}
	tok, err := tokenizer.Load(tokPath)
	if err != nil {
		t.Fatal(err)
	}
	if bias, n := benchUTF8Bans(t, tokPath, tok.Encode("And God said")); bias != "" || n != 0 {
		t.Errorf("benchUTF8Bans on valid text: %d bans %q, want none", n, bias)
	}

	for _, bad := range []string{"fast", "0", "-5", "NaN", "1e6"} {
		if _, err := benchNewLink(bad); err == nil || !strings.Contains(err.Error(), "BENCH_MBITS") {
			t.Errorf("BENCH_MBITS=%q: error %v, want one naming BENCH_MBITS", bad, err)
		}
	}
	if l, err := benchNewLink(""); l != nil || err != nil {
		t.Errorf("BENCH_MBITS unset: %v %v, want no link", l, err)
	}
	// The link's schedule, on a clock whose every sleep overruns by 1 ms:
	// 2 MB/s still gives 2 MB a second, and an idle second saves nothing.
	link, err := benchNewLink("16")
	if err != nil {
		t.Fatal(err)
	}
	clock := time.Unix(0, 0)
	link.now = func() time.Time { return clock }
	link.sleep = func(d time.Duration) { clock = clock.Add(d + time.Millisecond) }
	const chunks = 30 // 30 × 64 KiB: 0.983 s at 2 MB/s
	for range chunks {
		link.send(64 << 10)
	}
	if got, want := clock.Sub(time.Unix(0, 0)), time.Duration(chunks*(64<<10)/2e6*float64(time.Second)); got < want-benchLinkSlack || got > want+time.Millisecond {
		t.Errorf("%d × 64 KiB at 2 MB/s on an overrunning clock took %v, want %v", chunks, got, want)
	}
	clock = clock.Add(time.Second) // idle
	t1 := clock
	link.send(1e6)
	if got := clock.Sub(t1); got < 480*time.Millisecond {
		t.Errorf("1 MB at 2 MB/s after an idle second took %v, want ≥ 480 ms (no saved capacity)", got)
	}

	link, err = benchNewLink("16") // 2 MB/s: the 48,000-byte file in 24 ms
	if err != nil {
		t.Fatal(err)
	}
	h = benchLimit(benchStatic(t, dir, "wllama.wasm"), link)
	start := time.Now()
	if res := get("/wllama/wllama.wasm", nil); res.ContentLength != int64(len(wasm)) {
		t.Fatalf("through the link: %d bytes, want %d", res.ContentLength, len(wasm))
	}
	if d := time.Since(start); d < 4*time.Millisecond {
		t.Errorf("%d bytes crossed a 2 MB/s link in %v, want ≥ 24 ms less the 20 ms slack", len(wasm), d)
	}
}
