package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
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
	"syscall"
	"testing"
	"time"
)

// chromiumBaseFlags are the flags of webgpu.md §9 for a quiet, isolated
// headless Chromium.
var chromiumBaseFlags = []string{
	"--no-sandbox", "--no-first-run", "--no-default-browser-check", "--disable-background-networking",
	"--disable-component-update", "--disable-sync", "--disable-quic", "--disable-extensions",
	"--disable-default-apps", "--disable-breakpad", "--metrics-recording-only",
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
	} `json:"cache"`
	Info struct {
		Backend      string `json:"backend"`
		ParamsTotal  int64  `json:"paramsTotal"`
		ParamsActive int64  `json:"paramsActive"`
		Adapter      struct {
			Available    bool     `json:"available"`
			Reason       string   `json:"reason"`
			Vendor       string   `json:"vendor"`
			Architecture string   `json:"architecture"`
			Fallback     bool     `json:"fallback"`
			Features     []string `json:"features"`
		} `json:"adapter"`
	} `json:"info"`
	Stats struct {
		Tokens     int     `json:"tokens"`
		TTFTMs     float64 `json:"ttftMs"`
		DecodeTokS float64 `json:"decodeTokPerS"`
	} `json:"stats"`
	LoadMs   float64 `json:"loadMs"`
	Failures map[string]struct {
		Error         string `json:"error"`
		CachedWeights int    `json:"cachedWeights"`
	} `json:"failures"`
	GPU *struct {
		Backend string `json:"backend"`
		IDs     []int  `json:"ids"`
		Error   string `json:"error"`
		Adapter struct {
			Errors []string `json:"errors"`
		} `json:"adapter"`
		Stats struct {
			TTFTMs     float64 `json:"ttftMs"`
			DecodeTokS float64 `json:"decodeTokPerS"`
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
		Tokens  int    `json:"tokens"`
		Stopped string `json:"stopped"`
	} `json:"abort"`
}

// TestBrowserE2E builds the wasm engine, serves the page and a random
// k3-nano, and checks in headless Chromium that greedy generation in the
// browser yields exactly the ids of `tessera run --backend cpu`, then that
// a reload loads the model from Cache Storage with the model URL offline.
// It saves a screenshot of the page. Without Chromium it skips, except
// under CI=true, where it fails.
func TestBrowserE2E(t *testing.T) {
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

	// The server of `tessera serve`, plus a report endpoint and a switch
	// that takes /model/ offline for the second phase.
	var logBuf bytes.Buffer
	srv, err := newServer(serveConfig{ModelDir: modelDir, WasmDir: wasmDir, Loopback: true, Log: &logBuf})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	reports := make(chan testReport, 4)
	var offline atomic.Bool
	var modelHits atomic.Int64
	mux := http.NewServeMux()
	mux.HandleFunc("POST /__test/report", func(w http.ResponseWriter, r *http.Request) {
		var rep testReport
		if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&rep); err != nil {
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
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		for _, p := range []string{"/corrupt/", "/cut/"} {
			if rest, ok := strings.CutPrefix(r.URL.Path, p); ok {
				r.URL.Path = "/model/" + rest
			}
		}
		if strings.HasPrefix(r.URL.Path, "/model/") {
			if offline.Load() {
				http.Error(w, "offline", http.StatusServiceUnavailable)
				return
			}
			modelHits.Add(1)
		}
		srv.ServeHTTP(w, r)
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	hs := newHTTPServer(mux)
	go hs.Serve(ln)
	defer hs.Close()

	q := url.Values{"test": {"1"}, "prompt": {prompt}, "max": {strconv.Itoa(maxTok)}, "report": {"/__test/report"}, "phases": {"2"}, "abort": {"1"}, "gpu": {"1"}, "gpuwasm": {"/gpu/tessera.wasm"}, "conformance": {"1"},
		"failures": {"/nope/,/corrupt/,/cut/"}}
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
		case <-time.After(90 * time.Second):
			t.Fatalf("phase %d: no report from the page after 90 s\nconsole:\n%s\nchromium stderr:\n%s", phase, b.consoleText(), e2eTail(b.stderr.String(), 3000))
		}
		return testReport{}
	}
	r1 := wait(1)
	if !slices.Equal(r1.IDs, native) {
		t.Fatalf("browser greedy ids %v\nnative ids          %v", r1.IDs, native)
	}
	if r1.Cache.Misses == 0 || r1.Cache.BytesDownloaded == 0 {
		t.Errorf("first load: cache %+v, want downloads", r1.Cache)
	}
	// The -tags cpuonly bundle has no WebGPU runner: backend auto falls back
	// to the CPU and says why.
	if !strings.HasPrefix(r1.Info.Backend, "cpu (wasm); ") || !strings.Contains(r1.Info.Backend, "without the WebGPU runner") || r1.Info.ParamsTotal == 0 {
		t.Errorf("info %+v", r1.Info)
	}
	if !r1.Info.Adapter.Available {
		t.Errorf("no WebGPU adapter under --enable-unsafe-webgpu: %s", r1.Info.Adapter.Reason)
	}
	if r1.Abort == nil || r1.Abort.Stopped != "cancelled" || r1.Abort.Tokens > 20 {
		t.Errorf("aborting a generation after 3 tokens: %+v, want stopped=cancelled within a few tokens", r1.Abort)
	}
	for u, want := range map[string]string{"/nope/": "no model.manifest.json", "/corrupt/": "integrity check failed for model.safetensors",
		"/cut/": "interrupted"} {
		f, ok := r1.Failures[u]
		if !ok || !strings.Contains(f.Error, want) || f.CachedWeights != 0 {
			t.Errorf("loading %s: %+v, want an error containing %q and no cached weights", u, f, want)
		} else {
			t.Logf("loading %s fails: %s", u, f.Error)
		}
	}
	// The default (WebGPU) bundle with backend auto runs on the GPU
	// (SwiftShader counts) and its greedy ids equal native CPU ids.
	if g := r1.GPU; g == nil || g.Error != "" || !strings.HasPrefix(g.Backend, "gpu") || !slices.Equal(g.IDs, native) {
		t.Errorf("WebGPU backend in the browser: %+v, want backend gpu and ids %v", g, native)
	} else {
		t.Logf("WebGPU backend (%s): ids match native; TTFT %.0f ms, decode %.1f tok/s", g.Backend, g.Stats.TTFTMs, g.Stats.DecodeTokS)
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
			"KDARecurrent", "MLAAbsorbed", "MLANaive", "Router", "AttnRes", "Embed", "Argmax", "GLUBlock"} {
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
	hitsAfter1 := modelHits.Load()
	r2 := wait(2)
	if !slices.Equal(r2.IDs, native) {
		t.Fatalf("reload: browser ids %v, native %v", r2.IDs, native)
	}
	if r2.Cache.Misses != 0 || r2.Cache.Hits == 0 || !r2.Cache.Offline || modelHits.Load() != hitsAfter1 {
		t.Errorf("reload: cache %+v, model requests %d → %d; want every file from Cache Storage, offline", r2.Cache, hitsAfter1, modelHits.Load())
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
		t.Logf("abort after 3 tokens: stopped %q after %d tokens", r1.Abort.Stopped, r1.Abort.Tokens)
	}
	t.Logf("adapter: %s %s fallback=%v features=%v", a.Vendor, a.Architecture, a.Fallback, a.Features)
	t.Logf("load %.0f ms (engine start %.0f ms, model %.0f ms), TTFT %.1f ms, decode %.0f tok/s; reload %.0f ms from cache (offline)",
		r1.LoadMs, r1.Cache.EngineStartMs, r1.Cache.ModelMs, r1.Stats.TTFTMs, r1.Stats.DecodeTokS, r2.LoadMs)
	t.Logf("timings: wasm build %v, browser %v, total %v; screenshot %s", tBuild.Round(time.Millisecond),
		time.Since(tLaunch).Round(time.Millisecond), time.Since(start).Round(time.Millisecond), shot)
}

// e2eBuildWasm builds the bundle into dir as make wasm does: tessera.wasm,
// tessera.wasm.gz and wasm_exec.js.
func e2eBuildWasm(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	goBin := e2eGo()
	e2eGoBuild(t, filepath.Join(dir, wasmName), "-tags=cpuonly")
	// tessera.wasm.gz, as make wasm writes it.
	raw, err := os.ReadFile(filepath.Join(dir, wasmName))
	if err != nil {
		t.Fatal(err)
	}
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	zw.Write(raw)
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, wasmGzName), gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wasm: %d bytes, gzip -9 %d bytes", len(raw), gz.Len())
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

// e2eGo is the go command of the toolchain running the test.
func e2eGo() string {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		return "go"
	}
	return goBin
}

// e2eGoBuild builds ../../wasm for GOOS=js GOARCH=wasm as make wasm does.
func e2eGoBuild(t *testing.T, out string, flags ...string) {
	t.Helper()
	args := append([]string{"build", "-trimpath", "-ldflags=-s -w", "-o", out}, flags...)
	cmd := exec.Command(e2eGo(), append(args, "../../wasm")...)
	cmd.Env = append(os.Environ(), "GOOS=js", "GOARCH=wasm")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the wasm %s: %v\n%s", strings.Join(flags, " "), err, b)
	}
}

// e2eRun runs a tessera subcommand in process and returns its stdout.
func e2eRun(t *testing.T, args ...string) string {
	t.Helper()
	var out, errb bytes.Buffer
	if code := runMain(args, &out, &errb); code != 0 {
		t.Fatalf("tessera %s: exit %d\n%s", strings.Join(args, " "), code, errb.String())
	}
	return out.String()
}

// e2eParseIDs parses the output of run --ids.
func e2eParseIDs(t *testing.T, s string) []int {
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
	t      *testing.T
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

func startChromium(t *testing.T, chrome, dir string) *browser {
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
		"--window-size=1100,1100", "--user-data-dir="+profile, "about:blank")
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
