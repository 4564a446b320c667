package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"maps"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/wgsl"
)

// chromiumBaseFlags are the flags of webgpu.md §9 for a quiet, isolated
// headless Chromium.
var chromiumBaseFlags = []string{
	"--no-sandbox", "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
	"--disable-component-update", "--disable-sync", "--disable-quic", "--disable-extensions",
	"--disable-default-apps", "--disable-breakpad", "--metrics-recording-only",
}

// requireChromium returns the Chromium binary for a browser test: it
// skips the test without one (or under -short), except under CI=true,
// where a missing Chromium fails it.
func requireChromium(t testing.TB) string {
	t.Helper()
	chrome := findChromium()
	if chrome == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but Chromium is missing (/usr/lib/chromium/chromium): install it with scripts/setup.sh browser")
		}
		t.Skip("no Chromium (/usr/lib/chromium/chromium or $TESSERA_CHROMIUM); install it with scripts/setup.sh browser")
	}
	if testing.Short() {
		t.Skip("-short: skipping the browser test")
	}
	return chrome
}

// findChromium returns the Chromium binary ($TESSERA_CHROMIUM, else
// Debian's /usr/lib/chromium/chromium), or "".
func findChromium() string {
	for _, p := range []string{os.Getenv("TESSERA_CHROMIUM"), "/usr/lib/chromium/chromium"} {
		if p == "" {
			continue
		}
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p
		}
	}
	return ""
}

// testReport is what the page posts in test mode.
type testReport struct {
	OK    bool   `json:"ok"`
	Phase int    `json:"phase"`
	Error string `json:"error"`
	IDs   []int  `json:"ids"`
	Text  string `json:"text"`
	Cache struct {
		Hits, Misses    int
		BytesDownloaded int64   `json:"bytesDownloaded"`
		Offline         bool    `json:"offline"`
		EngineStartMs   float64 `json:"engineStartMs"`
		ModelMs         float64 `json:"modelMs"`
		DownloadMs      float64 `json:"downloadMs"`
		VerifyMs        float64 `json:"verifyMs"`
		CacheWriteMs    float64 `json:"cacheWriteMs"`
	} `json:"cache"`
	Shell struct {
		Active     bool   `json:"active"`
		Controlled bool   `json:"controlled"`
		Kept       string `json:"kept"` // the engine bundle the service worker keeps
	} `json:"shell"`
	Info struct {
		Vision       bool       `json:"vision"`
		Backend      string     `json:"backend"`
		CPUKernels   string     `json:"cpuKernels"`
		GPURunner    bool       `json:"gpuRunner"`
		ParamsTotal  int64      `json:"paramsTotal"`
		ParamsActive int64      `json:"paramsActive"`
		Adapter      e2eAdapter `json:"adapter"`
	} `json:"info"`
	Stats struct {
		Tokens       int     `json:"tokens"`
		PromptTokens int     `json:"promptTokens"`
		TTFTMs       float64 `json:"ttftMs"`
		DecodeTokS   float64 `json:"decodeTokPerS"`
	} `json:"stats"`
	Live     *liveReport   `json:"live"`
	GGUF     *ggufReport   `json:"gguf"`
	Check    *checkReport  `json:"check"`
	Shared   *sharedReport `json:"shared"`
	LoadMs   float64       `json:"loadMs"`
	Failures map[string]struct {
		Error         string `json:"error"`
		CachedWeights int    `json:"cachedWeights"`
		Orphans       int    `json:"orphans"` // store files no key lists
	} `json:"failures"`
	Quota *struct {
		Error string `json:"error"`
		Stats struct {
			CacheSkipped bool    `json:"cacheSkipped"`
			StorageFree  float64 `json:"storageFree"`
			Misses       int     `json:"misses"`
		} `json:"stats"`
		CachedWeights int `json:"cachedWeights"`
		Orphans       int `json:"orphans"`
	} `json:"quota"`
	GPU *struct {
		AutoBackend      string `json:"autoBackend"`
		Backend          string `json:"backend"`
		IDs              []int  `json:"ids"`
		SampledIDs       []int  `json:"sampledIds"`
		WeightsDeferred  bool   `json:"weightsDeferred"`
		Lost             bool   `json:"lost"`
		AfterLossIDs     []int  `json:"afterLossIds"`
		AfterLossBackend string `json:"afterLossBackend"`
		StreamIDs        []int  `json:"streamIds"`
		StreamCache      *struct {
			Slots, Experts int
			Misses         int64
			HitRate        float64 `json:"hitRate"`
		} `json:"streamCache"`
		Error string `json:"error"`
		Live  *struct {
			Tokens   int        `json:"tokens"`
			Backend  string     `json:"backend"`
			Load     []float64  `json:"load"`
			KDANorms []*float64 `json:"kdaNorms"`
		} `json:"live"`
		Adapter struct {
			Errors []string `json:"errors"`
		} `json:"adapter"`
		Stats struct {
			TTFTMs             float64 `json:"ttftMs"`
			DecodeTokS         float64 `json:"decodeTokPerS"`
			DispatchesPerToken int     `json:"dispatchesPerToken"`
			SubmitsPerToken    int     `json:"submitsPerToken"`
		} `json:"stats"`
	} `json:"gpu"`
	Conformance *struct {
		Error   string  `json:"error"`
		Passed  int     `json:"passed"`
		Failed  int     `json:"failed"`
		Total   int     `json:"total"`
		Ms      float64 `json:"ms"`
		Adapter struct {
			Vendor       string `json:"vendor"`
			Architecture string `json:"architecture"`
		} `json:"adapter"`
		Cases []struct {
			Name  string  `json:"name"`
			Op    string  `json:"op"`
			DType string  `json:"dtype"`
			NMSE  float64 `json:"nmse"`
			Bound float64 `json:"bound"`
			OK    bool    `json:"ok"`
			Error string  `json:"error"`
		} `json:"cases"`
	} `json:"conformance"`
	Abort *struct {
		Tokens    int    `json:"tokens"`    // the page received
		Generated int    `json:"generated"` // the engine sampled
		Stopped   string `json:"stopped"`
	} `json:"abort"`
	Vision *visionReport `json:"vision"`
}

// e2eAdapter is the WebGPU adapter a page reports (info().adapter).
type e2eAdapter struct {
	Available    bool     `json:"available"`
	Reason       string   `json:"reason"`
	Vendor       string   `json:"vendor"`
	Architecture string   `json:"architecture"`
	Device       string   `json:"device"`
	Description  string   `json:"description"`
	Fallback     bool     `json:"fallback"`
	Features     []string `json:"features"`
}

// adapterInfo is a as wgsl.ChooseAuto reads it (as wasm/gpu.go builds it).
func (a e2eAdapter) adapterInfo() wgsl.AdapterInfo {
	return wgsl.AdapterInfo{Vendor: a.Vendor, Architecture: a.Architecture, Name: a.Device,
		Description: a.Description, Fallback: a.Fallback}
}

// ggufReport is what the page's ggufCheck posts: greedy runs of GGUF
// files and the errors of broken ones.
type ggufReport struct {
	Runs []struct {
		URL       string `json:"url"`
		Want      string `json:"want"`
		Backend   string `json:"backend"`
		Exact     bool   `json:"exact"`
		Tokenizer string `json:"tokenizer"`
		Layout    string `json:"layout"`
		IDs       []int  `json:"ids"`
		Error     string `json:"error"`
		Cache     struct {
			Misses          int   `json:"misses"`
			BytesDownloaded int64 `json:"bytesDownloaded"`
		} `json:"cache"`
	} `json:"runs"`
	Bad map[string]struct {
		Error   string `json:"error"`
		Cached  int    `json:"cached"`
		Orphans int    `json:"orphans"`
	} `json:"bad"`
	// GPUMemory: info().gpuMemory of each ?gpumem= file on WebGPU.
	GPUMemory map[string]struct {
		Backend   string               `json:"backend"`
		GPUMemory *engine.GPUMemoryUse `json:"gpuMemory"`
		Error     string               `json:"error"`
	} `json:"gpuMemory"`
}

// e2eGGUF exports k3-micro (F16: the greedy tokens of its safetensors;
// Q8_0; Q4_K, for its GPU memory) to GGUF files with their manifests in
// dir, plus broken ones:
// cut.gguf (its manifest lists the whole file, the server sends half),
// half.gguf (half a file whose manifest matches it), nope.gguf (no
// manifest). It returns the native greedy ids each good file must give,
// and for the Q8_0 file also with exact products ("… exact": the page runs
// it so on the CPU and on WebGPU, where the ids must equal the native
// CPU's — exact products agree across backends).
func e2eGGUF(t testing.TB, dir, prompt string, maxTok int) map[string][]int {
	t.Helper()
	const micro = "../../models/k3-micro"
	run := func(model string, flags ...string) []int {
		args := append([]string{"run", "--backend", "cpu", "--model", model, "--prompt", prompt, "--max-tokens", strconv.Itoa(maxTok), "--ids"}, flags...)
		return e2eParseIDs(t, e2eRun(t, args...))
	}
	want := map[string][]int{}
	st := run(micro)
	for _, typ := range []string{"f16", "q8_0", "q4_k"} {
		name := "k3-micro." + typ + ".gguf"
		path := filepath.Join(dir, name)
		e2eRun(t, "export", "--model", micro, "--out", path, "--type", typ)
		e2eRun(t, "manifest", "--model", path)
		if typ != "q4_k" { // loaded for its GPU memory only
			want[name] = run(path)
		}
	}
	was := ref.SetInt8Activations(false) // --exact is process-wide: restored for the runs after it
	want["k3-micro.q8_0.gguf exact"] = run(filepath.Join(dir, "k3-micro.q8_0.gguf"), "--exact")
	ref.SetInt8Activations(was)
	if !slices.Equal(want["k3-micro.f16.gguf"], st) {
		t.Fatalf("native: the F16 GGUF gives %v, the safetensors %v", want["k3-micro.f16.gguf"], st)
	}
	data, err := os.ReadFile(filepath.Join(dir, "k3-micro.f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	half := data[:len(data)/2]
	manifest := func(name string, b []byte) {
		sum := sha256.Sum256(b)
		mf := modelManifest{Format: manifestFormat, TotalSize: int64(len(b)),
			Files: []manifestFile{{Name: name, Size: int64(len(b)), SHA256: hex.EncodeToString(sum[:])}}}
		if err := os.WriteFile(filepath.Join(dir, name+ggufManifestSuffix), mf.marshal(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, b := range map[string][]byte{"cut.gguf": half, "half.gguf": half} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	manifest("cut.gguf", data)
	manifest("half.gguf", half)
	return want
}

// e2eCheckGGUF checks the page's GGUF runs against the native ids, the
// errors of the broken files, and the GPU memory of the files in dir
// loaded on WebGPU (e2eCheckGPUMemory).
func e2eCheckGGUF(t testing.TB, g *ggufReport, want map[string][]int, dir string) {
	t.Helper()
	if g == nil || len(g.Runs) != 6 {
		t.Fatalf("GGUF in the browser: %+v, want 6 runs", g)
	}
	for _, r := range g.Runs {
		key := path.Base(r.URL)
		if r.Exact {
			key += " exact"
		}
		w := want[key]
		switch {
		case r.Error != "" || !slices.Equal(r.IDs, w):
			t.Errorf("GGUF %s (backend %s) in the browser: ids %v, error %q; native ids %v", r.URL, r.Want, r.IDs, r.Error, w)
		case r.Want == "gpu" && !strings.HasPrefix(r.Backend, "gpu"):
			t.Errorf("GGUF %s on WebGPU ran on %q", r.URL, r.Backend)
		case !strings.Contains(r.Tokenizer, "gguf") || r.Cache.BytesDownloaded == 0 && r.Cache.Misses != 0:
			t.Errorf("GGUF %s: tokenizer %q, cache %+v", r.URL, r.Tokenizer, r.Cache)
		default:
			t.Logf("GGUF %s in the browser (%s): ids match native (%s)", r.URL, r.Backend, r.Tokenizer)
		}
	}
	for u, want := range map[string]string{
		"/gguf/cut.gguf":  "stopped after",
		"/gguf/half.gguf": "runs past the end of the file",
		"/gguf/nope.gguf": "no nope.gguf.manifest.json",
	} {
		b, ok := g.Bad[u]
		if !ok || !strings.Contains(b.Error, want) || (u == "/gguf/cut.gguf" && b.Cached != 0) || b.Orphans != 0 {
			t.Errorf("loading %s: %+v, want an error containing %q", u, b, want)
		} else {
			t.Logf("loading %s fails: %s", u, b.Error)
		}
	}
	e2eCheckGPUMemory(t, g, dir)
}

// e2eGPUMemFiles are the GGUF files the page loads on WebGPU for their GPU
// memory (?gpumem=): the block formats stay in their blocks there.
var e2eGPUMemFiles = []string{"k3-micro.f16.gguf", "k3-micro.q4_k.gguf"}

// e2eCheckGPUMemory checks info().gpuMemory of e2eGPUMemFiles on WebGPU:
// the weights on the GPU within 2 % of the file's size (the rest of a
// file is its metadata and vocabulary) and the buffers within the weights,
// state and scratch, so the 4-bit file takes its share of the F16 one's
// GPU memory.
func e2eCheckGPUMemory(t testing.TB, g *ggufReport, dir string) {
	t.Helper()
	var weights []int64
	for _, name := range e2eGPUMemFiles {
		r, ok := g.GPUMemory["/gguf/"+name]
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		u := r.GPUMemory
		if !ok || r.Error != "" || u == nil || !strings.HasPrefix(r.Backend, "gpu") {
			t.Errorf("GPU memory of %s in the browser: %+v", name, r)
			continue
		}
		if ratio := float64(u.Weights) / float64(st.Size()); ratio < 0.98 || ratio > 1.02 || u.Weights != u.ModelWeights {
			t.Errorf("%s on WebGPU: %d bytes of weights (%d of the model's) for a %d-byte file (%.3f×)", name, u.Weights, u.ModelWeights, st.Size(), ratio)
		}
		if rest := u.Bytes - u.Weights - u.State; rest <= 0 || rest > u.Scratch {
			t.Errorf("%s on WebGPU: buffers %+v hold %d bytes beside weights and state, want in (0, scratch]", name, *u, rest)
		}
		weights = append(weights, u.Weights)
		t.Logf("%s on WebGPU: GPU buffers %s, weights %s, file %s", name, bytesStr(u.Bytes), bytesStr(u.Weights), bytesStr(st.Size()))
	}
	if len(weights) == 2 {
		t.Logf("Q4_K against F16 on WebGPU: weights %.3f×", float64(weights[1])/float64(weights[0]))
	}
}

// liveReport is what the page drew of its live routing/state view after
// the test generation (app.js liveReport).
type liveReport struct {
	Tokens    int       `json:"tokens"`
	Window    int       `json:"window"`
	Rows      []int     `json:"rows"`
	Experts   int       `json:"experts"`
	TopK      int       `json:"topK"`
	RowSums   []float64 `json:"rowSums"`
	Load      []float64 `json:"load"`
	Target    float64   `json:"target"`
	BandLo    float64   `json:"bandLo"`
	BandHi    float64   `json:"bandHi"`
	Backend   string    `json:"backend"`
	KDANorms  []float64 `json:"kdaNorms"`
	Steps     int       `json:"steps"`
	DrawnRows int       `json:"drawnRows"`
	DrawnKDA  int       `json:"drawnKDA"`
	HeatInk   int       `json:"heatInk"`
	NormsInk  int       `json:"normsInk"`
	Caption   string    `json:"caption"`
}

// e2eCheckLive checks the page's live view of a greedy generation of
// maxTok tokens from a promptTokens-token prompt of the model in dir: the
// routing window holds the tokens the model ran, every MoE layer of the
// configuration has a row whose loads add up to top-k, every KDA layer a
// positive state norm, and both canvases were drawn.
func e2eCheckLive(t testing.TB, l *liveReport, dir string, promptTokens, maxTok int) {
	t.Helper()
	if l == nil {
		t.Fatal("the page reported no live view")
	}
	raw, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	var moe []int
	kda := 0
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		if cfg.IsMoE(i) {
			moe = append(moe, i)
		}
		if cfg.Kinds[i] == config.KDA {
			kda++
		}
	}
	if want := min(l.Window, promptTokens+maxTok); l.Tokens != want || promptTokens == 0 {
		t.Errorf("live view: %d tokens in the window, want %d (prompt %d + %d generated, window %d)", l.Tokens, want, promptTokens, maxTok, l.Window)
	}
	if !slices.Equal(l.Rows, moe) || l.Experts != cfg.NumExperts || l.TopK != cfg.TopK || l.Steps != maxTok {
		t.Errorf("live view: rows %v experts %d top-k %d steps %d; want rows %v, %d experts, top-%d, %d steps", l.Rows, l.Experts, l.TopK, l.Steps, moe, cfg.NumExperts, cfg.TopK, maxTok)
	}
	for r, s := range l.RowSums {
		if math.Abs(s-float64(cfg.TopK)) > 1e-9 {
			t.Errorf("live view: layer %d loads add up to %v, want top-k %d", l.Rows[r], s, cfg.TopK)
		}
	}
	if !(l.BandLo < l.Target && l.Target < l.BandHi) || l.Target != float64(cfg.TopK)/float64(cfg.NumExperts) {
		t.Errorf("live view: target %v band [%v, %v]", l.Target, l.BandLo, l.BandHi)
	}
	if len(l.KDANorms) != kda || kda == 0 {
		t.Errorf("live view: %d KDA norms, want %d", len(l.KDANorms), kda)
	}
	for _, n := range l.KDANorms {
		if !(n > 0) {
			t.Errorf("live view: KDA norms %v, want all > 0", l.KDANorms)
			break
		}
	}
	if l.DrawnRows != len(moe) || l.DrawnKDA != kda || l.HeatInk < len(moe)*cfg.NumExperts || l.NormsInk == 0 || l.Backend != "CPU" {
		t.Errorf("live view drawn: %d rows, %d KDA lines, %d + %d inked pixels, backend %q", l.DrawnRows, l.DrawnKDA, l.HeatInk, l.NormsInk, l.Backend)
	}
	t.Logf("live view: %s", l.Caption)
}

// visionReport is what the page's visionCheck posts: a greedy image+text
// generation on the CPU-only bundle and on WebGPU, and the RGBA pixels the
// browser decoded.
type visionReport struct {
	Error    string     `json:"error"`
	CPU, GPU *visionRun `json:"-"`
	Pixels   struct {
		Width  int    `json:"width"`
		Height int    `json:"height"`
		SHA256 string `json:"sha256"`
		RGBA   string `json:"rgba"` // base64
	} `json:"pixels"`
	Decoded map[string]struct {
		Width  int    `json:"width"`
		Height int    `json:"height"`
		RGBA   string `json:"rgba"`
		Error  string `json:"error"`
	} `json:"decoded"`
	BadImage string `json:"badImage"`
	// Lazy: a text-only session on the vision model, then an image
	// (lazyVisionCheck).
	Lazy struct {
		Error     string `json:"error"`
		IDs       []int  `json:"ids"`
		LoadStats struct {
			BytesDownloaded int64 `json:"bytesDownloaded"`
			FetchedAhead    int   `json:"fetchedAhead"`
		} `json:"loadStats"`
		KeysTextOnly   []string `json:"keysTextOnly"`
		KeysAfterImage []string `json:"keysAfterImage"`
		// NoRange: the same model from a server that ignores ranges.
		NoRange struct {
			LoadStats struct {
				BytesDownloaded int64 `json:"bytesDownloaded"`
				FetchedAhead    int   `json:"fetchedAhead"`
			} `json:"loadStats"`
			Keys []string `json:"keys"`
		} `json:"noRange"`
		// Keep: keepOffline right after a load, twice.
		Keep struct {
			First, Again struct {
				Bytes int64 `json:"bytes"`
			}
			Keys []string `json:"keys"`
		} `json:"keep"`
	} `json:"lazy"`
}

type visionRun struct {
	Backend     string `json:"backend"`
	Vision      bool   `json:"vision"`
	Error       string `json:"error"`
	IDs         []int  `json:"ids"`
	ImageTokens struct {
		Sample int `json:"sample"`
		Max    int `json:"max"`
	} `json:"imageTokens"`
	Stats struct {
		PromptTokens int     `json:"promptTokens"`
		TTFTMs       float64 `json:"ttftMs"`
		EncodeMs     float64 `json:"encodeMs"`
		DecodeTokS   float64 `json:"decodeTokPerS"`
		Images       []struct {
			Width, Height, Tokens int
			SHA256                string `json:"sha256"`
		} `json:"images"`
	} `json:"stats"`
}

func (v *visionReport) UnmarshalJSON(b []byte) error {
	type plain visionReport
	var runs struct {
		CPU *visionRun `json:"cpu"`
		GPU *visionRun `json:"gpu"`
	}
	if err := json.Unmarshal(b, (*plain)(v)); err != nil {
		return err
	}
	if err := json.Unmarshal(b, &runs); err != nil {
		return err
	}
	v.CPU, v.GPU = runs.CPU, runs.GPU
	return nil
}

// e2ePhaseLimit is how long TestBrowserE2E waits for one phase's report:
// phase 1 runs the kernel conformance subset on SwiftShader (about 200
// cases, each op's pipelines compiled on the CPU) besides the page's own
// checks, which takes minutes on 2 cores.
const e2ePhaseLimit = 480 * time.Second

// TestBrowserE2E builds the wasm engine, serves the page and a random
// k3-nano, and checks in headless Chromium that greedy generation in the
// browser yields exactly the ids of `tessera run --backend cpu`, then that
// a reload with the server offline (503 for every path) loads the page
// through the service worker and the model from Cache Storage.
// With a random k3-nano-vision and a fixed PNG it checks that image+text
// greedy ids (CPU-only bundle and WebGPU) equal `tessera run --image` on
// the RGBA the browser fed the engine, and that this RGBA equals Go's
// decode of the PNG.
// It saves a screenshot of the page. Without Chromium it skips, except
// under CI=true, where it fails.
func TestBrowserE2E(tt *testing.T) {
	t := withRecap(tt)
	chrome := requireChromium(t)
	start := time.Now()
	dir := t.TempDir()

	// The wasm bundle, as `make wasm` builds it.
	wasmDir := filepath.Join(dir, "wasm")
	e2eBuildWasm(t, wasmDir)
	// The bundle as `make wasm` builds it plus the kernel conformance cases
	// (-tags conformance), served as /gpu/tessera.wasm.
	gpuWasm := filepath.Join(dir, "gpu", wasmName)
	e2eGoBuild(t, gpuWasm, "-tags=conformance")
	tBuild := time.Since(start)

	var logBuf syncBuffer // the servers' log
	// A random k3-nano and the native CPU ids for the prompt.
	modelDir := filepath.Join(dir, "k3-nano")
	const prompt, maxTok = "Hello, tessera!", 16
	e2eRun(t, "init-random", "--config", "k3-nano", "--seed", "1", "--layout", "kimi_k3", "--out", modelDir)
	e2eRun(t, "manifest", "--model", modelDir)
	native := e2eParseIDs(t, e2eRun(t, "run", "--backend", "cpu", "--model", modelDir, "--prompt", prompt,
		"--max-tokens", strconv.Itoa(maxTok), "--ids"))
	if len(native) == 0 {
		t.Fatal("native run produced no tokens")
	}
	nativeSampled := e2eParseIDs(t, e2eRun(t, "run", "--backend", "cpu", "--model", modelDir, "--prompt", prompt,
		"--max-tokens", strconv.Itoa(maxTok), "--temperature", "0.8", "--top-k", "40", "--top-p", "0.95", "--seed", "11", "--ids"))
	// A random k3-nano-vision, served under /vision/, and a fixed PNG
	// without alpha (served under /__test/img/ with testdata/images).
	visionDir := filepath.Join(dir, "k3-nano-vision")
	const vprompt = "Describe the image."
	e2eRun(t, "init-random", "--config", "k3-nano-vision", "--seed", "1", "--layout", "kimi_k3", "--out", visionDir)
	// parts of 1 MiB: its text tensors come in two (the second fetched
	// while the engine binds the first), the vision tower's in one
	e2eRun(t, "manifest", "--model", visionDir, "--part-size", "1M")
	imgDir := filepath.Join(dir, "img")
	pngData := e2eTestPNG(t, filepath.Join(imgDir, "e2e.png"))
	decodeNames := []string{"quadrants.jpg", "quadrants-exif6.jpg", "alpha.png", "gray.png", "checker.gif", "blue-purple-pink.lossy.webp"}
	for _, n := range decodeNames {
		b, err := os.ReadFile(testImage(n))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(imgDir, n), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ggufDir := filepath.Join(dir, "gguf")
	if err := os.MkdirAll(ggufDir, 0o755); err != nil {
		t.Fatal(err)
	}
	ggufWant := e2eGGUF(t, ggufDir, prompt, maxTok)
	// `tessera serve --model FILE.gguf`, under /ggufsrv/: the page loads
	// the directory URL, whose manifest lists the one GGUF file
	gsrv, err := newServer(serveConfig{ModelDir: filepath.Join(ggufDir, "k3-micro.q8_0.gguf"), Loopback: true, Log: &logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer gsrv.Close()
	ggufWant["ggufsrv"] = ggufWant["k3-micro.q8_0.gguf"]
	vsrv, err := newServer(serveConfig{ModelDir: visionDir, Loopback: true, Log: &logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer vsrv.Close()

	// The server of `tessera serve`, plus a report endpoint and a switch
	// that takes /model/ offline for the second phase.
	srv, err := newServer(serveConfig{ModelDir: modelDir, WasmDir: wasmDir, Loopback: true, Log: &logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	reports := make(chan testReport, 4)
	var offline atomic.Bool
	var modelHits, shellOffline atomic.Int64
	var bundleHits [2]atomic.Int64 // phase 1's requests for /tessera.wasm, /tessera-cpu.wasm
	mux := http.NewServeMux()
	mux.HandleFunc("POST /__test/report", func(w http.ResponseWriter, r *http.Request) {
		var rep testReport
		if err := json.NewDecoder(io.LimitReader(r.Body, 16<<20)).Decode(&rep); err != nil {
			rep = testReport{Error: "bad report: " + err.Error()}
		}
		if rep.Phase == 1 {
			offline.Store(true) // before the page navigates to phase 2
		}
		reports <- rep
	})
	weights, err := os.ReadFile(filepath.Join(modelDir, "model.safetensors"))
	if err != nil {
		t.Fatal(err)
	}
	// /corrupt/ serves the model with one weight byte flipped; /cut/ drops
	// the connection halfway through the weights.
	mux.HandleFunc("/corrupt/model.safetensors", func(w http.ResponseWriter, r *http.Request) {
		bad := slices.Clone(weights)
		bad[len(bad)-1] ^= 1
		w.Write(bad)
	})
	mux.HandleFunc("/cut/model.safetensors", func(w http.ResponseWriter, r *http.Request) {
		conn, bw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		defer conn.Close()
		fmt.Fprintf(bw, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n", len(weights))
		bw.Write(weights[:len(weights)/2])
		bw.Flush()
	})
	mux.HandleFunc("/gpu/tessera.wasm", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/wasm")
		http.ServeFile(w, r, gpuWasm)
	})
	mux.Handle("/__test/img/", http.StripPrefix("/__test/img/", http.FileServer(http.Dir(imgDir))))
	mux.Handle("/gguf/", http.StripPrefix("/gguf/", http.FileServer(http.Dir(ggufDir))))
	mux.HandleFunc("/ggufsrv/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/model/" + strings.TrimPrefix(r.URL.Path, "/ggufsrv/")
		gsrv.ServeHTTP(w, r)
	})
	mux.HandleFunc("/vision/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/model/" + strings.TrimPrefix(r.URL.Path, "/vision/")
		vsrv.ServeHTTP(w, r)
	})
	// /vision-norange/: the same, from a server that ignores Range headers
	mux.HandleFunc("/vision-norange/", func(w http.ResponseWriter, r *http.Request) {
		r.URL.Path = "/model/" + strings.TrimPrefix(r.URL.Path, "/vision-norange/")
		r.Header.Del("Range")
		vsrv.ServeHTTP(w, r)
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, p := range []string{"/corrupt/", "/cut/"} {
			if rest, ok := strings.CutPrefix(r.URL.Path, p); ok {
				r.URL.Path = "/model/" + rest
			}
		}
		if offline.Load() {
			// Phase 2: the server is gone; the page, its scripts, the wasm
			// and the model must all come from the browser's caches.
			if !strings.HasPrefix(r.URL.Path, "/model/") {
				shellOffline.Add(1)
			}
			http.Error(w, "offline", http.StatusServiceUnavailable)
			return
		}
		if strings.HasPrefix(r.URL.Path, "/model/") {
			modelHits.Add(1)
		}
		for i, n := range []string{"/" + wasmName, "/" + wasmCPUName} {
			if r.URL.Path == n {
				bundleHits[i].Add(1)
			}
		}
		srv.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// Every 404 the page gets is a failure, except under /nope/, the
	// failure check's deliberately missing model, and the GGUF check's
	// missing manifest.
	var missing notFoundLog
	hs := newHTTPServer(missing.wrap(mux, "/nope/", "/gguf/nope.gguf"))
	go hs.Serve(ln)
	defer hs.Close()

	q := url.Values{"test": {"1"}, "prompt": {prompt}, "max": {strconv.Itoa(maxTok)}, "report": {"/__test/report"}, "phases": {"2"}, "abort": {"1"}, "gpu": {"1"}, "gpuwasm": {"/gpu/tessera.wasm"}, "conformance": {"1"},
		"failures": {"/nope/,/corrupt/,/cut/"}, "quota": {"1"}, "vision": {"/vision/"}, "visionnorange": {"/vision-norange/"}, "vprompt": {vprompt}, "image": {"/__test/img/e2e.png"},
		"gguf": {"/gguf/k3-micro.f16.gguf,/gguf/k3-micro.q8_0.gguf,/ggufsrv/"}, "ggufexact": {"/gguf/k3-micro.q8_0.gguf"}, "ggufbad": {"/gguf/cut.gguf,/gguf/half.gguf,/gguf/nope.gguf"},
		"check": {"/vision/,/gguf/k3-micro.q8_0.gguf"}, "checkbad": {strings.Join(slices.Collect(maps.Keys(e2eCheckBad)), ",")}, "checkctx": {strconv.Itoa(e2eCheckCtx)}, "shared": {"1"}}
	var gpuMem []string
	for _, n := range e2eGPUMemFiles {
		gpuMem = append(gpuMem, "/gguf/"+n)
	}
	q.Set("gpumem", strings.Join(gpuMem, ","))
	var decodeURLs []string
	for _, n := range decodeNames {
		decodeURLs = append(decodeURLs, "/__test/img/"+n)
	}
	q.Set("decode", strings.Join(decodeURLs, ","))
	pageURL := "http://" + ln.Addr().String() + "/?" + q.Encode()

	b := startChromium(t, chrome, dir)
	defer b.close()
	page, err := b.attachPage()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.call(page, "Runtime.enable", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := b.call(page, "Page.navigate", map[string]any{"url": pageURL}); err != nil {
		t.Fatal(err)
	}
	tLaunch := time.Now()

	wait := func(phase int) testReport {
		t.Helper()
		select {
		case rep := <-reports:
			if !rep.OK || rep.Phase != phase {
				t.Fatalf("phase %d: page reported failure: %+v\nconsole:\n%s\nserver log:\n%s", phase, rep, b.consoleText(), logBuf.String())
			}
			return rep
		case err := <-b.died:
			t.Fatalf("phase %d: chromium exited early: %v\nstderr:\n%s", phase, err, b.stderr.String())
		case <-time.After(e2ePhaseLimit):
			t.Fatalf("phase %d: no report from the page after %v\nconsole:\n%s\nchromium stderr:\n%s", phase, e2ePhaseLimit, b.consoleText(), e2eTail(b.stderr.String(), 3000))
		}
		return testReport{}
	}
	r1 := wait(1)
	if !slices.Equal(r1.IDs, native) {
		t.Fatalf("browser greedy ids %v\nnative ids          %v", r1.IDs, native)
	}
	// (cacheWriteMs: the time writing the downloads to the store, OPFS;
	// the second phase's hits show they were committed)
	if c := r1.Cache; c.Misses == 0 || c.BytesDownloaded == 0 || c.DownloadMs <= 0 || c.VerifyMs <= 0 || c.CacheWriteMs <= 0 ||
		c.DownloadMs+c.VerifyMs+c.CacheWriteMs > c.ModelMs {
		t.Errorf("first load: cache %+v, want downloads, checked and cached, within modelMs", c)
	}
	// The page's backend auto runs the CPU-only bundle (served under both
	// names here), which decides as wgsl.ChooseAuto does: on SwiftShader, a
	// fallback adapter, the CPU with ChooseAuto's reason; on an adapter
	// ChooseAuto would take, the CPU because the bundle has no WebGPU
	// runner.
	if a := r1.Info.Adapter; !a.Available {
		if !strings.HasPrefix(r1.Info.Backend, "cpu (wasm); no WebGPU adapter") {
			t.Errorf("backend auto without an adapter: %q", r1.Info.Backend)
		}
	} else if want := wgsl.ChooseAuto(a.adapterInfo(), false); want.GPU && !strings.Contains(r1.Info.Backend, "without the WebGPU runner") ||
		!want.GPU && !strings.HasPrefix(r1.Info.Backend, "cpu (wasm); auto chose the CPU: "+want.Reason) {
		t.Errorf("backend auto in the CPU-only bundle on %+v: %q, want the CPU (%s)", a, r1.Info.Backend, want.Reason)
	}
	if r1.Info.GPURunner || r1.Info.ParamsTotal == 0 {
		t.Errorf("info %+v, want the CPU-only bundle's (gpuRunner false)", r1.Info)
	}
	// Where auto cannot take the GPU (no adapter, or the fallback one),
	// pages load only tessera-cpu.wasm, and the service worker keeps that
	// one for offline visits.
	if a := r1.Info.Adapter; !a.Available || a.Fallback {
		if full, cpu := bundleHits[0].Load(), bundleHits[1].Load(); full != 0 || cpu == 0 {
			t.Errorf("phase 1 requested /%s %d times and /%s %d times; want only the CPU-only bundle", wasmName, full, wasmCPUName, cpu)
		}
		if r1.Shell.Kept != wasmCPUName {
			t.Errorf("the service worker keeps %q for offline visits, want %s", r1.Shell.Kept, wasmCPUName)
		}
	}
	// The CPU path's products run in core/ref's SIMD128 module (Chromium
	// has WebAssembly SIMD; the worker sets globalThis.wasm).
	if r1.Info.CPUKernels != "WebAssembly SIMD128 kernels" {
		t.Errorf("CPU kernels in the browser: %q, want the SIMD128 module", r1.Info.CPUKernels)
	}
	if !r1.Info.Adapter.Available {
		t.Errorf("no WebGPU adapter under --enable-unsafe-webgpu: %s", r1.Info.Adapter.Reason)
	}
	e2eCheckLive(t, r1.Live, modelDir, r1.Stats.PromptTokens, maxTok)
	if r1.Abort == nil || r1.Abort.Stopped != "cancelled" || r1.Abort.Tokens != 3 {
		t.Errorf("aborting a generation after 3 tokens: %+v, want stopped=cancelled and no token after the abort", r1.Abort)
	}
	for u, want := range map[string]string{"/nope/": "no model.manifest.json", "/corrupt/": "integrity check failed for model.safetensors",
		"/cut/": "interrupted"} {
		f, ok := r1.Failures[u]
		if !ok || !strings.Contains(f.Error, want) || f.CachedWeights != 0 || f.Orphans != 0 {
			t.Errorf("loading %s: %+v, want an error containing %q, no cached weights and no stored bytes", u, f, want)
		} else {
			t.Logf("loading %s fails: %s", u, f.Error)
		}
	}
	// Too little storage for the weights: the model loads, uncached.
	if q := r1.Quota; q == nil || q.Error != "" || !q.Stats.CacheSkipped || q.Stats.StorageFree != 1000 || q.Stats.Misses == 0 || q.CachedWeights != 0 || q.Orphans != 0 {
		t.Errorf("loading with 1 KB of storage free: %+v, want a load without caching", q)
	}
	// Plain backend auto on SwiftShader (a fallback adapter, slower than
	// the CPU path) chooses the CPU and says why; on any other adapter it
	// decides as wgsl.ChooseAuto does.
	if g := r1.GPU; g != nil && g.Error == "" {
		a := r1.Info.Adapter
		want := wgsl.ChooseAuto(a.adapterInfo(), false)
		switch {
		case want.GPU && !strings.HasPrefix(g.AutoBackend, "gpu"):
			t.Errorf("backend auto on %+v: %q, want the GPU", a, g.AutoBackend)
		case !want.GPU && (!strings.HasPrefix(g.AutoBackend, "cpu (wasm); auto chose the CPU: ") ||
			!strings.Contains(g.AutoBackend, want.Reason) || !strings.Contains(g.AutoBackend, "backend 'gpu' forces it")):
			t.Errorf("backend auto on %+v: %q, want the CPU with the reason %q", a, g.AutoBackend, want.Reason)
		default:
			t.Logf("backend auto: %s", g.AutoBackend)
		}
		if a.Fallback && want.GPU {
			t.Errorf("ChooseAuto took the fallback adapter %+v", a)
		}
	}
	// The default (WebGPU) bundle with backend auto and
	// allowSoftwareAdapter runs on the GPU (SwiftShader) and its greedy
	// ids equal native CPU ids.
	if g := r1.GPU; g == nil || g.Error != "" || !strings.HasPrefix(g.Backend, "gpu") || !slices.Equal(g.IDs, native) {
		t.Errorf("WebGPU backend in the browser: %+v, want backend gpu and ids %v", g, native)
	} else {
		t.Logf("WebGPU backend (%s): ids match native; TTFT %.0f ms, decode %.1f tok/s", g.Backend, g.Stats.TTFTMs, g.Stats.DecodeTokS)
		e2eCheckPageDispatches(t, modelDir, prompt, maxTok, r1.Info.Adapter, g.Stats.DispatchesPerToken, g.Stats.SubmitsPerToken)
		// seeded sampling on the GPU gives native CPU sampling's ids; the
		// weights went to the GPU without the whole model in the wasm heap
		if !slices.Equal(g.SampledIDs, nativeSampled) {
			t.Errorf("sampled ids on WebGPU %v, native CPU %v", g.SampledIDs, nativeSampled)
		}
		// the live view on WebGPU: the routing read back from the device
		// equals the CPU path's
		if l := g.Live; l == nil || l.Backend != "WebGPU" || r1.Live == nil || l.Tokens != r1.Live.Tokens || !slices.Equal(l.Load, r1.Live.Load) {
			t.Errorf("live view on WebGPU: %+v, want the CPU's routing (%v)", l, r1.Live)
		} else {
			for _, n := range l.KDANorms {
				if n != nil && !(*n > 0) {
					t.Errorf("live view on WebGPU: KDA norm %v", *n)
				}
			}
		}
		if !g.WeightsDeferred {
			t.Errorf("the WebGPU engine loaded the weights into the wasm heap (weightsDeferred false)")
		}
		// gpuMemory 25%: experts streamed through 2 of 8 slots per layer
		// (routing read back in js), the same ids
		if c := g.StreamCache; c == nil || c.Slots != 2 || c.Misses == 0 || !slices.Equal(g.StreamIDs, native) {
			t.Errorf("gpuMemory 25%% in the browser: ids %v, expert cache %+v; want ids %v and misses in 2 slots", g.StreamIDs, c, native)
		} else {
			t.Logf("gpuMemory 25%%: ids match native; expert cache %+v", *c)
		}
		// a lost GPU device: backend auto goes on on the CPU with the same ids
		// (the engine's mid-generation fallback, or the next generation's)
		if !g.Lost || !slices.Equal(g.AfterLossIDs, native) || !strings.HasPrefix(g.AfterLossBackend, "cpu (wasm); the GPU") ||
			!strings.Contains(g.AfterLossBackend, "device was lost") {
			t.Errorf("after losing the GPU device: lost %v, ids %v, backend %q; want the CPU with ids %v", g.Lost, g.AfterLossIDs, g.AfterLossBackend, native)
		} else {
			t.Logf("after losing the GPU device: %s; ids match native", g.AfterLossBackend)
		}
	}
	// Kernel conformance cases on the browser's WebGPU: every op family.
	if c := r1.Conformance; c == nil || c.Error != "" || c.Failed != 0 || c.Passed == 0 {
		t.Errorf("kernel conformance in the browser: %+v", c)
	} else {
		ops := map[string]bool{}
		for _, cs := range c.Cases {
			ops[strings.SplitN(cs.Op, "/", 2)[0]] = true
		}
		for _, op := range []string{"Linear", "RMSNorm", "RMSNormGated", "L2Norm", "GLU", "Add", "Axpy", "ShortConv", "KDAGate",
			"KDARecurrent", "KDAChunked", "MLAAbsorbed", "MLANaive", "Router", "AttnRes", "Embed", "Argmax", "Sample", "GLUBlock"} {
			if !ops[op] {
				t.Errorf("browser conformance covers no %s case", op)
			}
		}
		t.Logf("browser conformance on %s %s: %d/%d cases passed (of %d in the suite) in %.0f ms",
			c.Adapter.Vendor, c.Adapter.Architecture, c.Passed, c.Passed+c.Failed, c.Total, c.Ms)
		if os.Getenv("TESSERA_SUPPORT_MATRIX") == "write" {
			data, err := json.MarshalIndent(c, "", " ")
			if err == nil {
				err = os.WriteFile("../../wgsl/testdata/browser-conformance.json", append(data, '\n'), 0o644)
			}
			if err != nil {
				t.Errorf("writing the browser conformance results: %v", err)
			}
		}
	}
	e2eCheckGGUF(t, r1.GGUF, ggufWant, ggufDir)
	e2eCheckShared(t, r1.Shared, native)
	e2eCheckModelCheck(t, r1.Check, map[string]string{"/vision/": visionDir, "/gguf/k3-micro.q8_0.gguf": filepath.Join(ggufDir, "k3-micro.q8_0.gguf")},
		"/vision/", e2eCheckCtx, e2eCheckBad)
	if r1.Info.Vision {
		t.Errorf("k3-nano info says vision: true")
	}
	tVision := time.Now()
	e2eCheckVision(t, r1.Vision, pngData, visionDir, vprompt, maxTok, dir, decodeNames)
	tVisionNative := time.Since(tVision)
	hitsAfter1 := modelHits.Load()
	r2 := wait(2)
	if !slices.Equal(r2.IDs, native) {
		t.Fatalf("reload: browser ids %v, native %v", r2.IDs, native)
	}
	if c := r2.Cache; c.Misses != 0 || c.Hits == 0 || !c.Offline || modelHits.Load() != hitsAfter1 || c.DownloadMs+c.VerifyMs+c.CacheWriteMs != 0 {
		t.Errorf("reload: cache %+v, model requests %d → %d; want every file from Cache Storage, offline", r2.Cache, hitsAfter1, modelHits.Load())
	}
	// The service worker: active after the first visit, controlling the
	// reload, which the server (answering 503 to everything) did not serve.
	if !r1.Shell.Active || !r2.Shell.Active || !r2.Shell.Controlled || shellOffline.Load() == 0 {
		t.Errorf("offline page: phase 1 shell %+v, reload %+v, page requests refused while offline %d; want the reload served by the service worker",
			r1.Shell, r2.Shell, shellOffline.Load())
	}

	if paths := missing.paths(); len(paths) > 0 {
		t.Errorf("the page requested files the server does not have (404): %v", paths)
	}

	shotDir := os.Getenv("TESSERA_SCREENSHOT_DIR")
	if shotDir == "" {
		shotDir, err = os.MkdirTemp("", "tessera-browser-")
		if err != nil {
			t.Fatal(err)
		}
	}
	shot := filepath.Join(shotDir, "page.png")
	if err := b.screenshot(page, shot); err != nil {
		t.Errorf("screenshot: %v", err)
	}
	a := r1.Info.Adapter
	t.Logf("ids %v (match native); text %q", r1.IDs, r1.Text)
	if r1.Abort != nil {
		t.Logf("abort after 3 tokens: stopped %q, %d tokens received, %d sampled", r1.Abort.Stopped, r1.Abort.Tokens, r1.Abort.Generated)
	}
	t.Logf("adapter: %s %s fallback=%v features=%v", a.Vendor, a.Architecture, a.Fallback, a.Features)
	t.Logf("load %.0f ms (engine start %.0f ms, model %.0f ms), TTFT %.1f ms, decode %.0f tok/s; reload %.0f ms from cache (offline)",
		r1.LoadMs, r1.Cache.EngineStartMs, r1.Cache.ModelMs, r1.Stats.TTFTMs, r1.Stats.DecodeTokS, r2.LoadMs)
	t.Logf("timings: wasm build %v, browser %v (native vision checks %v), total %v; screenshot %s", tBuild.Round(time.Millisecond),
		time.Since(tLaunch).Round(time.Millisecond), tVisionNative.Round(time.Millisecond), time.Since(start).Round(time.Millisecond), shot)
}

// notFoundLog records the paths a server answered with 404.
type notFoundLog struct {
	mu   sync.Mutex
	list []string
}

// wrap returns h, recording each 404 whose path has none of the prefixes
// in expected.
func (l *notFoundLog) wrap(h http.Handler, expected ...string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(sw, r)
		if sw.code != http.StatusNotFound || slices.ContainsFunc(expected, func(p string) bool { return strings.HasPrefix(r.URL.Path, p) }) {
			return
		}
		l.mu.Lock()
		l.list = append(l.list, r.Method+" "+r.URL.Path)
		l.mu.Unlock()
	})
}

// paths returns the recorded requests.
func (l *notFoundLog) paths() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.list)
}

// statusWriter remembers the status code written through it; Unwrap lets
// http.ResponseController reach the connection (hijacking, flushing).
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// e2eTestPNG writes a fixed 200×150 RGB PNG (no alpha channel) to path and
// returns its bytes.
func e2eTestPNG(t testing.TB, path string) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 200, 150))
	for y := 0; y < 150; y++ {
		for x := 0; x < 200; x++ {
			c := color.RGBA{uint8(x * 255 / 199), uint8(y * 255 / 149), uint8((x*x + 3*y) % 251), 255}
			if (x/25+y/25)%2 == 0 {
				c.B = 255 - c.B
			}
			img.SetRGBA(x, y, c)
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil { // opaque: colour type 2 (RGB)
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// e2eCheckVision checks the page's image+text generations: the RGBA the
// browser fed the engine equals Go's decode of the PNG, and the greedy
// ids on the CPU-only bundle and on WebGPU equal `tessera run --backend
// cpu --image` on a PNG of exactly that RGBA. It logs how the browser's
// decode of the testdata images compares with core/imageio's.
// e2eCheckLazyVision checks the page's text-only session on the vision
// model (modelDir, whose manifest splits model.safetensors into a text and
// a vision part): its load downloads every file but the vision part and
// caches the text part only; an image then fetches and caches the vision
// part.
func e2eCheckLazyVision(t testing.TB, v *visionReport, modelDir string) {
	t.Helper()
	l := v.Lazy
	mf, err := readManifest(modelDir)
	if err != nil {
		t.Fatal(err)
	}
	var want, visSize int64
	var text, vis string
	for _, f := range mf.Files {
		if f.Parts == nil {
			want += f.Size
			continue
		}
		for _, p := range f.Parts {
			key := fmt.Sprintf("%s?bytes=%d-%d&sha256=%s", f.Name, p.Offset, p.Offset+p.Size-1, p.SHA256)
			if p.Vision {
				vis, visSize = key, visSize+p.Size
			} else {
				want += p.Size
				text = key
			}
		}
	}
	has := func(keys []string, k string) bool {
		return slices.ContainsFunc(keys, func(u string) bool { return strings.HasSuffix(u, "/"+k) })
	}
	switch {
	case l.Error != "" || len(l.IDs) == 0:
		t.Errorf("text-only session on the vision model: %+v", l)
	case text == "" || vis == "" || len(mf.Files[len(mf.Files)-1].Parts) < 3:
		t.Errorf("the vision model's manifest has no text parts (two at least) and vision part: %+v", mf.Files)
	case l.LoadStats.BytesDownloaded != want || !has(l.KeysTextOnly, text) || has(l.KeysTextOnly, vis):
		t.Errorf("text-only session: downloaded %d bytes (want %d, the vision part left out), cached %v", l.LoadStats.BytesDownloaded, want, l.KeysTextOnly)
	case l.LoadStats.FetchedAhead == 0:
		// the engine binds the first text part while the second downloads
		t.Errorf("text-only session: no part was fetched ahead of the engine's read (stats %+v)", l.LoadStats)
	case !has(l.KeysAfterImage, vis):
		t.Errorf("after an image: cached %v, want the vision part %s too", l.KeysAfterImage, vis)
	default:
		t.Logf("text-only session on the vision model: %d bytes downloaded, the vision part (%s) only with the first image; %d parts fetched ahead", want, vis, l.LoadStats.FetchedAhead)
	}
	// Without range support the whole checkpoint comes at once, and each
	// of its parts is cached.
	// (once: nothing is fetched ahead, as each request would bring it all)
	if nr := l.NoRange; nr.LoadStats.BytesDownloaded != mf.TotalSize || !has(nr.Keys, text) || !has(nr.Keys, vis) || nr.LoadStats.FetchedAhead != 0 {
		t.Errorf("from a server without ranges: downloaded %d bytes (want the whole model, %d), cached %v, %d parts fetched ahead (want 0)", nr.LoadStats.BytesDownloaded, mf.TotalSize, nr.Keys, nr.LoadStats.FetchedAhead)
	}
	// keepOffline after a text-only load fetches and caches the vision
	// part, once.
	if k := l.Keep; k.First.Bytes != visSize || k.Again.Bytes != 0 || !has(k.Keys, vis) {
		t.Errorf("keepOffline: downloaded %d then %d bytes (want %d, then 0), cached %v", k.First.Bytes, k.Again.Bytes, visSize, k.Keys)
	}
}

func e2eCheckVision(t testing.TB, v *visionReport, pngData []byte, modelDir, prompt string, maxTok int, dir string, decodeNames []string) {
	t.Helper()
	if v == nil || v.Error != "" || v.CPU == nil || v.GPU == nil {
		t.Errorf("vision check: %+v", v)
		return
	}
	e2eCheckLazyVision(t, v, modelDir)
	px := v.Pixels
	rgba, err := base64.StdEncoding.DecodeString(px.RGBA)
	if err != nil || len(rgba) != px.Width*px.Height*4 || px.Width == 0 {
		t.Errorf("browser RGBA: %d×%d, %d bytes, %v", px.Width, px.Height, len(rgba), err)
		return
	}
	sum := sha256.Sum256(rgba)
	if got := hex.EncodeToString(sum[:]); got != px.SHA256 {
		t.Errorf("sha256 of the reported RGBA %s, page says %s", got, px.SHA256)
	}
	// Go's decode of the same PNG.
	goImg, err := png.Decode(bytes.NewReader(pngData))
	if err != nil {
		t.Fatal(err)
	}
	b := goImg.Bounds()
	goRGBA := image.NewNRGBA(b)
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			goRGBA.Set(x, y, goImg.At(x, y))
		}
	}
	if px.Width != b.Dx() || px.Height != b.Dy() || !bytes.Equal(rgba, goRGBA.Pix) {
		n, worst := rgbaDiff(rgba, goRGBA.Pix)
		t.Errorf("the browser decoded the PNG as %d×%d RGBA differing from Go's image/png in %d values (max |Δ| %d)", px.Width, px.Height, n, worst)
	} else {
		t.Logf("browser RGBA of the %d×%d PNG equals Go's image/png decode byte for byte (sha256 %s…)", px.Width, px.Height, px.SHA256[:12])
	}
	// Native ids from exactly the RGBA the browser fed the engine.
	fed := &image.NRGBA{Pix: rgba, Stride: 4 * px.Width, Rect: image.Rect(0, 0, px.Width, px.Height)}
	var buf bytes.Buffer
	if err := png.Encode(&buf, fed); err != nil {
		t.Fatal(err)
	}
	fedPath := filepath.Join(dir, "browser-rgba.png")
	if err := os.WriteFile(fedPath, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	native := e2eParseIDs(t, e2eRun(t, "run", "--backend", "cpu", "--model", modelDir, "--image", fedPath, "--prompt", prompt,
		"--max-tokens", strconv.Itoa(maxTok), "--ids"))
	for name, r := range map[string]*visionRun{"CPU-only bundle": v.CPU, "WebGPU": v.GPU} {
		switch {
		case r.Error != "":
			t.Errorf("image generation on the %s: %s", name, r.Error)
		case !r.Vision || r.ImageTokens.Sample == 0:
			t.Errorf("%s: info says vision %v, image tokens %+v", name, r.Vision, r.ImageTokens)
		case len(r.Stats.Images) != 1 || r.Stats.Images[0].SHA256 != px.SHA256 || r.Stats.Images[0].Tokens == 0:
			t.Errorf("%s: the engine was fed %+v, want one image with sha256 %s", name, r.Stats.Images, px.SHA256)
		case !slices.Equal(r.IDs, native):
			t.Errorf("%s (%s): browser image+text greedy ids %v\nnative tessera run --image ids %v", name, r.Backend, r.IDs, native)
		default:
			t.Logf("image+text on the %s (%s): ids match native; %d image tokens of %d, encode %.0f ms, TTFT %.0f ms, decode %.1f tok/s",
				name, r.Backend, r.Stats.Images[0].Tokens, r.Stats.PromptTokens, r.Stats.EncodeMs, r.Stats.TTFTMs, r.Stats.DecodeTokS)
		}
	}
	if !strings.HasPrefix(v.CPU.Backend, "cpu") || !strings.HasPrefix(v.GPU.Backend, "gpu") {
		t.Errorf("backends: CPU-only bundle %q, default bundle %q; want cpu and gpu", v.CPU.Backend, v.GPU.Backend)
	}
	if !strings.Contains(v.BadImage, "cannot decode") {
		t.Errorf("generate with a Blob that is not an image: %q, want a decode error", v.BadImage)
	}
	// How the browser's decoders compare with core/imageio's (after
	// compositing over white, as the engine does). Measured with Chromium
	// 156: lossless images (PNG with and without alpha, GIF) are byte-exact;
	// JPEG and lossy WebP differ (chroma upsampling: up to ±122 at the sharp
	// colour edges of quadrants.jpg, ±38 for WebP), so ids for those files
	// differ between the browser and `tessera run --image`. Opaque lossless
	// files must match; the rest is logged.
	for _, n := range decodeNames {
		d, ok := v.Decoded["/__test/img/"+n]
		if !ok || d.Error != "" {
			t.Errorf("browser decode of %s: %+v", n, d)
			continue
		}
		data, _ := os.ReadFile(testImage(n))
		want, _, err := imageio.Decode(data, imageio.Limits{})
		if err != nil {
			t.Errorf("Go decode of %s: %v", n, err)
			continue
		}
		raw, _ := base64.StdEncoding.DecodeString(d.RGBA)
		got, err := imageio.FromRGBA(d.Width, d.Height, raw, imageio.Limits{})
		if err != nil || got.W != want.W || got.H != want.H {
			t.Errorf("browser decode of %s: %d×%d (%v), Go %d×%d", n, d.Width, d.Height, err, want.W, want.H)
			continue
		}
		diff, worst := rgbaDiff(got.Pix, want.Pix)
		if diff != 0 && (n == "gray.png" || n == "checker.gif") { // lossless and opaque: must be exact
			t.Errorf("browser decode of %s differs from core/imageio in %d values (max |Δ| %d)", n, diff, worst)
		}
		t.Logf("decode %-28s %3d×%-3d browser vs core/imageio: %5d of %5d RGB values differ, max |Δ| %d", n, d.Width, d.Height, diff, len(want.Pix), worst)
	}
}

// rgbaDiff counts differing bytes of a and b and the largest difference.
func rgbaDiff(a, b []byte) (n, worst int) {
	if len(a) != len(b) {
		return max(len(a), len(b)), 255
	}
	for i := range a {
		d := int(a[i]) - int(b[i])
		if d != 0 {
			n++
			worst = max(worst, d, -d)
		}
	}
	return n, worst
}

// e2eBuildWasm builds the CPU-only bundle (-tags=cpuonly) into dir as make
// wasm does with WASM_TAGS=cpuonly: tessera.wasm, tessera-cpu.wasm (the
// same bundle), their gzips and wasm_exec.js.
func e2eBuildWasm(t testing.TB, dir string) {
	t.Helper()
	e2eBuildBundle(t, dir, "-tags=cpuonly")
	for _, ext := range []string{"", ".gz"} {
		b, err := os.ReadFile(filepath.Join(dir, wasmName+ext))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, wasmCPUName+ext), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// e2eBuildBundle builds the bundle into dir as make wasm does, with the go
// build flags given (none: the default bundle, with the WebGPU runner).
func e2eBuildBundle(t testing.TB, dir string, flags ...string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goBin := e2eGo()
	e2eGoBuild(t, filepath.Join(dir, wasmName), flags...)
	e2eGzip(t, filepath.Join(dir, wasmName))
	out, err := exec.Command(goBin, "env", "GOROOT").Output()
	if err != nil {
		t.Fatalf("go env GOROOT: %v", err)
	}
	src, err := os.ReadFile(filepath.Join(strings.TrimSpace(string(out)), "lib", "wasm", wasmExecName))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, wasmExecName), src, 0o644); err != nil {
		t.Fatal(err)
	}
}

// e2eBuildCPUBundle adds to dir the CPU-only bundle `make wasm` writes
// beside tessera.wasm (tessera-cpu.wasm, -tags cpuonly, and its gzip),
// which pages load for backend 'cpu'.
func e2eBuildCPUBundle(t *testing.T, dir string) {
	t.Helper()
	e2eGoBuild(t, filepath.Join(dir, wasmCPUName), "-tags=cpuonly")
	e2eGzip(t, filepath.Join(dir, wasmCPUName))
}

// e2eGzip writes path.gz (gzip -9), as make wasm does, and logs both sizes.
func e2eGzip(t testing.TB, path string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path+".gz", gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d bytes, gzip -9 %d bytes", filepath.Base(path), len(raw), gz.Len())
}

// e2eGo is the go command of the toolchain running the test.
func e2eGo() string {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		return "go"
	}
	return goBin
}

// e2eGoBuild builds ../../wasm for GOOS=js GOARCH=wasm as make wasm does.
func e2eGoBuild(t testing.TB, out string, flags ...string) {
	t.Helper()
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}, flags...)
	cmd := exec.Command(e2eGo(), append(args, "../../wasm")...)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the wasm %s: %v\n%s", strings.Join(flags, " "), err, b)
	}
}

// e2eRun runs a tessera subcommand in process and returns its stdout.
func e2eRun(t testing.TB, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runMain(args, &out, &errb); code != 0 {
		t.Fatalf("tessera %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// e2eParseIDs parses the output of run --ids.
func e2eParseIDs(t testing.TB, s string) []int {
	t.Helper()
	var ids []int
	for _, f := range strings.Fields(s) {
		v, err := strconv.Atoi(f)
		if err != nil {
			t.Fatalf("native output %q: %v", s, err)
		}
		ids = append(ids, v)
	}
	return ids
}

// e2eTail returns the last n bytes of s.
func e2eTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

// browser is a headless Chromium driven over the DevTools protocol on a
// pipe (--remote-debugging-pipe: commands on fd 3, replies on fd 4, each
// message NUL-terminated JSON), so no WebSocket client is needed.
type browser struct {
	t      testing.TB
	cmd    *exec.Cmd
	w      io.WriteCloser
	died   chan error
	stderr *syncBuffer

	mu      sync.Mutex
	next    int
	waiting map[int]chan cdpMessage
	console []string
}

type cdpMessage struct {
	ID        int             `json:"id"`
	Method    string          `json:"method"`
	SessionID string          `json:"sessionId"`
	Params    json.RawMessage `json:"params"`
	Result    json.RawMessage `json:"result"`
	Error     *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func startChromium(t testing.TB, chrome, dir string) *browser {
	t.Helper()
	profile := filepath.Join(dir, "profile")
	tmp := filepath.Join(dir, "tmp")
	for _, d := range []string{profile, tmp} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	resR, resW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	args := append(slices.Clone(chromiumBaseFlags), "--headless", "--enable-unsafe-webgpu", "--remote-debugging-pipe",
		"--window-size=1100,1100", "--disable-popup-blocking", "--user-data-dir="+profile, "about:blank")
	cmd := exec.Command(chrome, args...)
	cmd.ExtraFiles = []*os.File{cmdR, resW} // fd 3: commands in, fd 4: replies out
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	b := &browser{t: t, cmd: cmd, w: cmdW, died: make(chan error, 1), stderr: &syncBuffer{}, waiting: map[int]chan cdpMessage{}}
	cmd.Stderr = b.stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", chrome, err)
	}
	cmdR.Close()
	resW.Close()
	go func() { b.died <- cmd.Wait() }()
	go b.read(resR)
	return b
}

func (b *browser) read(r io.ReadCloser) {
	defer r.Close()
	br := bufio.NewReaderSize(r, 1<<20)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			return
		}
		var m cdpMessage
		if json.Unmarshal(raw[:len(raw)-1], &m) != nil {
			continue
		}
		b.mu.Lock()
		if m.ID != 0 {
			if ch, ok := b.waiting[m.ID]; ok {
				ch <- m
				delete(b.waiting, m.ID)
			}
		} else if m.Method == "Runtime.consoleAPICalled" || m.Method == "Runtime.exceptionThrown" {
			b.console = append(b.console, m.Method+" "+string(m.Params))
		}
		b.mu.Unlock()
	}
}

// call sends a DevTools command (to a session when session != "") and
// waits up to 20 s for its result.
func (b *browser) call(session, method string, params any) (json.RawMessage, error) {
	b.mu.Lock()
	b.next++
	id := b.next
	ch := make(chan cdpMessage, 1)
	b.waiting[id] = ch
	b.mu.Unlock()
	msg := map[string]any{"id": id, "method": method}
	if params != nil {
		msg["params"] = params
	}
	if session != "" {
		msg["sessionId"] = session
	}
	data, _ := json.Marshal(msg) // maps of plain values: cannot fail
	if _, err := b.w.Write(append(data, 0)); err != nil {
		return nil, fmt.Errorf("%s: writing to chromium: %w", method, err)
	}
	select {
	case m := <-ch:
		if m.Error != nil {
			return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
		}
		return m.Result, nil
	case <-time.After(20 * time.Second):
		return nil, fmt.Errorf("%s: no reply from chromium in 20 s", method)
	}
}

// attachPage attaches to the first page target and returns its session.
func (b *browser) attachPage() (string, error) {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		res, err := b.call("", "Target.getTargets", nil)
		if err != nil {
			return "", err
		}
		var tg struct {
			TargetInfos []struct{ TargetID, Type string } `json:"targetInfos"`
		}
		if err := json.Unmarshal(res, &tg); err != nil {
			return "", err
		}
		for _, ti := range tg.TargetInfos {
			if ti.Type == "page" {
				res, err := b.call("", "Target.attachToTarget", map[string]any{"targetId": ti.TargetID, "flatten": true})
				if err != nil {
					return "", err
				}
				var at struct{ SessionID string }
				if err := json.Unmarshal(res, &at); err != nil {
					return "", err
				}
				return at.SessionID, nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return "", errors.New("chromium shows no page target")
}

// screenshot writes a PNG of the page to path.
func (b *browser) screenshot(session, path string) error {
	res, err := b.call(session, "Page.captureScreenshot", map[string]any{"format": "png"})
	if err != nil {
		return err
	}
	var shot struct{ Data string }
	if err := json.Unmarshal(res, &shot); err != nil {
		return err
	}
	png, err := base64.StdEncoding.DecodeString(shot.Data)
	if err != nil {
		return err
	}
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		return errors.New("the screenshot is not a PNG")
	}
	return os.WriteFile(path, png, 0o644)
}

func (b *browser) consoleText() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return e2eTail(strings.Join(b.console, "\n"), 6000)
}

// close kills Chromium's whole process group and waits for it.
func (b *browser) close() {
	b.w.Close()
	syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-b.died:
	case <-time.After(10 * time.Second):
	}
}

// e2eCheckPageDispatches requires the page's decode step on WebGPU to be
// one submission of the dispatches the native runner records for the
// same generation (live view on) with the fusions the page's adapter calls for (the
// repeating ones off on a software adapter such as SwiftShader): a page
// device that took the wrong class of adapter, or a step the page
// records differently, shows here.
func e2eCheckPageDispatches(t testing.TB, modelDir, prompt string, maxTok int, a e2eAdapter, dispatches, submits int) {
	t.Helper()
	if submits != 1 || dispatches <= 0 {
		t.Errorf("page on WebGPU: %d dispatches in %d submissions per decoded token, want one submission", dispatches, submits)
	}
	e, err := engine.Open(modelDir, engine.OpenOptions{Backend: "gpu", Quiet: true})
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("CI=true but no native GPU to count the page's dispatches against: %v", err)
		}
		t.Logf("note: no native GPU to count the page's dispatches against: %v", err)
		return
	}
	defer e.Close()
	info := a.adapterInfo()
	repeat := info.Software() == ""
	defer e.Dev.SetRepeatFusions(repeat, 0)()
	// the page's generation draws the live view (onLive), which reads the
	// routing and state back: so does this one
	live := engine.NewLiveView(e.Cfg, 64, 64)
	st, err := e.Generate(context.Background(), engine.Options{Prompt: prompt, MaxTokens: maxTok, Live: live}, func(engine.Piece) bool { return true })
	if err != nil {
		t.Fatal(err)
	}
	if dispatches != st.DispatchesPerToken || submits != st.SubmitsPerToken {
		t.Errorf("page on WebGPU (%s %s): %d dispatches in %d submissions per decoded token; natively (%s, repeating fusions %v) %d in %d",
			a.Vendor, a.Architecture, dispatches, submits, e.Dev.Info(), repeat, st.DispatchesPerToken, st.SubmitsPerToken)
	} else {
		t.Logf("page on WebGPU: %d dispatches in one submission per decoded token, as natively (repeating fusions %v)", dispatches, repeat)
	}
}

// TestWasmBundleDeps: neither browser bundle links Go's regexp package
// (0.09 MB gzip of every cold page load; the tokenizer's patterns use
// regexp2, the rest plain string scans) or crypto (Go's FIPS 140 module,
// 0.05 MB, for one SHA-256: core/digest), and the CPU-only bundle links no
// WebGPU binding (nor the log/slog its js code pulls in, 0.03 MB).
func TestWasmBundleDeps(t *testing.T) {
	for _, tc := range []struct {
		tags      string
		forbidden []string // import paths, or prefixes ending in "/"
	}{
		{"", []string{"regexp", "regexp/syntax", "crypto/"}},
		{"cpuonly", []string{"regexp", "regexp/syntax", "crypto/", "github.com/cogentcore/webgpu/", "log/slog"}},
	} {
		cmd := exec.Command(e2eGo(), "list", "-deps", "-tags="+tc.tags, "../../wasm")
		cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps (tags %q): %v\n%s", tc.tags, err, out)
		}
		for line := range strings.Lines(string(out)) {
			p := strings.TrimSpace(line)
			for _, f := range tc.forbidden {
				if p == f || strings.HasSuffix(f, "/") && strings.HasPrefix(p, f) {
					t.Errorf("the wasm bundle (tags %q) links %s", tc.tags, p)
				}
			}
		}
	}
}
