package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tessera-llm/tessera/cmd/tessera/internal/api"
	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/web"
)

func init() {
	register("serve", "serve the browser demo page, the wasm engine and a model (loopback only by default)", cmdServe)
}

// Names under the wasm directory (`make wasm` writes them, each bundle
// with NAME.gz beside it): the engine with the WebGPU runner, the
// CPU-only engine a page loads for backend 'cpu' (tessera.js; without it
// the page falls back to the full one), Go's loader.
const (
	wasmName     = "tessera.wasm"
	wasmCPUName  = "tessera-cpu.wasm"
	wasmExecName = "wasm_exec.js"
)

// contentSecurityPolicy allows the page's own scripts, the worker, wasm
// compilation and model downloads from this server or HTTPS hosts.
const contentSecurityPolicy = "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; " +
	"connect-src 'self' https:; img-src 'self' blob: data:; style-src 'self'; object-src 'none'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// serveConfig says what a server serves.
type serveConfig struct {
	ModelDir string // served under /model/; "" for none
	WasmDir  string // tessera.wasm (+ .gz, wasm_exec.js); "" or missing: 404
	WebDir   string // page files from disk instead of the embedded ones
	// Loopback makes the server refuse requests whose Host header is not a
	// loopback name (DNS rebinding would otherwise expose the model).
	Loopback bool
	Log      io.Writer
	// API serves the OpenAI-compatible endpoints under /v1/ (nil: none).
	API http.Handler
}

// server is the http.Handler of `tessera serve`. Every file it serves comes
// from one of three roots (page, wasm, model), opened with os.Root so that
// neither "..", absolute names nor symlinks reach outside them; directories
// are never listed.
type server struct {
	cfg      serveConfig
	page     fs.FS
	pageTags map[string]string // validators (unquoted) of embedded files
	wasm     *os.Root          // nil: no wasm directory
	model    *os.Root          // nil: no model
	manifest []byte            // generated manifest, when the model dir has none or a stale one (always for a GGUF file)
	only     string            // a GGUF file: the one file of the model root served
	execJS   []byte            // wasm_exec.js from GOROOT when the wasm dir has none
	started  time.Time

	gzMu sync.Mutex
	gz   map[string]*gzCopy // per served file (root/name): its gzip form made in memory
}

// newServer opens the roots of cfg. It fails when the model directory does
// not hold a loadable model.
func newServer(cfg serveConfig) (*server, error) {
	if cfg.Log == nil {
		cfg.Log = io.Discard
	}
	s := &server{cfg: cfg, page: web.FS, started: time.Now(), pageTags: map[string]string{}}
	if cfg.WebDir != "" {
		r, err := os.OpenRoot(cfg.WebDir)
		if err != nil {
			return nil, fmt.Errorf("--web: %w", err)
		}
		s.page = r.FS()
	} else {
		entries, _ := fs.ReadDir(web.FS, ".")
		for _, e := range entries {
			b, err := fs.ReadFile(web.FS, e.Name())
			if err == nil {
				sum := sha256.Sum256(b)
				s.pageTags[e.Name()] = hex.EncodeToString(sum[:8])
			}
		}
	}
	if cfg.WasmDir != "" {
		r, err := os.OpenRoot(cfg.WasmDir)
		if err != nil {
			return nil, fmt.Errorf("--wasm: %w", err)
		}
		s.wasm = r
		if _, err := r.Stat(wasmName); err != nil {
			fmt.Fprintf(cfg.Log, "tessera serve: warning: %s has no %s (run \"make wasm\"); the page cannot start the engine\n", cfg.WasmDir, wasmName)
		}
	}
	if s.wasm == nil || !rootHas(s.wasm, wasmExecName) {
		if p := goWasmExec(); p != "" {
			b, err := os.ReadFile(p)
			if err == nil {
				s.execJS = b
			}
		}
		if s.execJS == nil {
			fmt.Fprintf(cfg.Log, "tessera serve: warning: no %s in the wasm directory and no Go toolchain found to take it from\n", wasmExecName)
		}
	}
	if cfg.ModelDir != "" {
		if err := s.openModel(cfg.ModelDir); err != nil {
			s.Close()
			return nil, err
		}
	}
	go s.warm()
	return s, nil
}

// openModel checks the model directory (or GGUF file) and its manifest.
// A GGUF file is served alone, under its own name, with its manifest as
// model.manifest.json: the page's worker loads a directory whose manifest
// lists one .gguf file and no config.json as that GGUF.
func (s *server) openModel(dir string) error {
	mf, err := readManifest(dir)
	stale := ""
	if err == nil {
		stale = staleManifest(dir, mf)
	}
	if err != nil || stale != "" {
		why := stale
		if err != nil && errors.Is(err, fs.ErrNotExist) {
			why = "no " + filepath.Base(manifestPath(dir))
		} else if err != nil {
			why = err.Error()
		}
		fresh, berr := buildManifest(dir, defaultPartSize)
		if berr != nil {
			return fmt.Errorf("--model %s: %w", dir, berr)
		}
		s.manifest = fresh.marshal()
		fmt.Fprintf(s.cfg.Log, "tessera serve: %s: %s; serving a manifest computed now (write it with \"tessera manifest --model %s\")\n", dir, why, dir)
	} else if _, err := manifestFiles(dir); err != nil {
		return fmt.Errorf("--model %s: %w", dir, err)
	} else if model.IsGGUF(dir) {
		s.manifest = mf.marshal() // FILE.gguf.manifest.json, served as model.manifest.json
	}
	if model.IsGGUF(dir) {
		s.only = filepath.Base(dir)
	}
	r, err := os.OpenRoot(filesDir(dir))
	if err != nil {
		return fmt.Errorf("--model: %w", err)
	}
	s.model = r
	return nil
}

// warm compresses what a page load fetches as gzip, once, now rather than
// on the first request: the engine bundles without NAME.gz beside them and
// the model's text files.
func (s *server) warm() {
	if s.wasm != nil {
		for _, n := range []string{wasmName, wasmCPUName} {
			if !rootHas(s.wasm, n+".gz") {
				s.warmGzip(s.wasm, "wasm", n)
			}
		}
	}
	if s.model != nil && s.only == "" {
		s.warmGzip(s.model, "model", append([]string{"config.json", "tokenizer.json"}, chat.Files...)...)
	}
}

// Close releases the roots.
func (s *server) Close() {
	for _, r := range []*os.Root{s.wasm, s.model} {
		if r != nil {
			r.Close()
		}
	}
}

func rootHas(r *os.Root, name string) bool {
	st, err := r.Stat(name)
	return err == nil && st.Mode().IsRegular()
}

// goWasmExec finds wasm_exec.js of the Go toolchain: $GOROOT, then
// `go env GOROOT`.
func goWasmExec() string {
	var roots []string
	if g := os.Getenv("GOROOT"); g != "" {
		roots = append(roots, g)
	}
	if goBin, err := exec.LookPath("go"); err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		out, err := exec.CommandContext(ctx, goBin, "env", "GOROOT").Output()
		cancel()
		if err == nil {
			roots = append(roots, strings.TrimSpace(string(out)))
		}
	}
	for _, r := range roots {
		for _, p := range []string{filepath.Join(r, "lib", "wasm", wasmExecName), filepath.Join(r, "misc", "wasm", wasmExecName)} {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p
			}
		}
	}
	return ""
}

// cleanPath validates a request path and returns its segments. It rejects
// "." and ".." segments, hidden names, empty segments (absolute names
// after a prefix, "//"), backslashes and control characters. The path is
// already percent-decoded, so encoded traversal is caught as well.
func cleanPath(p string) ([]string, bool) {
	if !strings.HasPrefix(p, "/") {
		return nil, false
	}
	if p == "/" {
		return nil, true
	}
	segs := strings.Split(p[1:], "/")
	for i, sg := range segs {
		if sg == "" && i == len(segs)-1 {
			continue // trailing slash: a directory, refused later
		}
		if sg == "" || sg[0] == '.' || strings.ContainsAny(sg, "\\:") {
			return nil, false
		}
		for _, c := range sg {
			if c < 0x20 || c == 0x7f {
				return nil, false
			}
		}
	}
	return segs, true
}

// loopbackHost reports whether a Host header names this machine.
func loopbackHost(host string) bool {
	h, _, err := net.SplitHostPort(host)
	if err != nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	if strings.EqualFold(h, "localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Resource-Policy", "same-origin")
	if s.cfg.Loopback && !loopbackHost(r.Host) {
		http.Error(w, "tessera serve answers only requests for localhost / 127.0.0.1 / [::1]", http.StatusMisdirectedRequest)
		return
	}
	if strings.HasPrefix(r.URL.Path, "/v1/") {
		if s.cfg.API == nil {
			api.NotFound(w, "no_model", "no model is loaded: start tessera serve with --model DIR")
			return
		}
		s.cfg.API.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	segs, ok := cleanPath(r.URL.Path)
	if !ok || strings.Contains(r.URL.RawPath, "%00") {
		http.Error(w, "bad path", http.StatusBadRequest)
		return
	}
	switch {
	case len(segs) == 0:
		s.servePage(w, r, "index.html")
	case len(segs) == 1 && (segs[0] == wasmName || segs[0] == wasmCPUName):
		s.serveWasm(w, r, segs[0])
	case len(segs) == 1 && segs[0] == wasmExecName:
		s.serveExec(w, r)
	case len(segs) == 1:
		s.servePage(w, r, segs[0])
	case segs[0] == "model":
		s.serveModel(w, r, strings.Join(segs[1:], "/"))
	default:
		http.NotFound(w, r)
	}
}

// contentType is the Content-Type of a served file name.
func contentType(name string) string {
	switch path.Ext(name) {
	case ".html":
		return "text/html; charset=utf-8"
	case ".js", ".mjs":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	case ".json":
		return "application/json"
	case ".wasm":
		return "application/wasm"
	case ".png":
		return "image/png"
	case ".svg":
		return "image/svg+xml"
	}
	return "application/octet-stream"
}

func (s *server) servePage(w http.ResponseWriter, r *http.Request, name string) {
	if name == "index.html" && r.URL.Path != "/" {
		http.Redirect(w, r, "/", http.StatusMovedPermanently)
		return
	}
	f, err := s.page.Open(name)
	if err != nil {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		http.NotFound(w, r)
		return
	}
	rs, ok := f.(io.ReadSeeker)
	if !ok {
		http.Error(w, "page file is not seekable", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", contentType(name))
	h.Set("Cache-Control", "no-cache")
	if ext := path.Ext(name); ext == ".html" || ext == ".js" {
		h.Set("Content-Security-Policy", contentSecurityPolicy)
	}
	b := fileBody("page", name, rs, st)
	if tag, ok := s.pageTags[name]; ok {
		b.tag = tag
		b.mod = s.started // embedded files have no time
	}
	s.serveBody(w, r, b)
}

// serveWasm serves the engine bundle name (tessera.wasm or
// tessera-cpu.wasm), gzip-compressed when the client accepts it: NAME.gz
// when it is at least as new, else the copy serveBody compresses once.
func (s *server) serveWasm(w http.ResponseWriter, r *http.Request, name string) {
	if s.wasm == nil {
		http.Error(w, "no wasm directory: build the engine with \"make wasm\" and pass --wasm DIR", http.StatusNotFound)
		return
	}
	f, st, ok := openRegular(s.wasm, name)
	if !ok {
		http.Error(w, name+" not found: build it with \"make wasm\"", http.StatusNotFound)
		return
	}
	defer f.Close()
	h := w.Header()
	h.Set("Content-Type", "application/wasm")
	h.Set("Cache-Control", "no-cache")
	b := fileBody("wasm", name, f, st)
	if gf, gst, ok := openRegular(s.wasm, name+".gz"); ok {
		defer gf.Close()
		if !gst.ModTime().Before(st.ModTime()) {
			b.gz = gf
		}
	}
	s.serveBody(w, r, b)
}

func (s *server) serveExec(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/javascript; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Security-Policy", contentSecurityPolicy)
	if s.wasm != nil {
		if f, st, ok := openRegular(s.wasm, wasmExecName); ok {
			defer f.Close()
			s.serveBody(w, r, fileBody("wasm", wasmExecName, f, st))
			return
		}
	}
	if s.execJS == nil {
		http.Error(w, wasmExecName+" not found: \"make wasm\" copies it from the Go toolchain", http.StatusNotFound)
		return
	}
	s.serveBody(w, r, s.memBody("goroot", wasmExecName, s.execJS))
}

// serveModel serves a file of the model directory, with ranges and
// validators; the manifest is the generated one when the directory's was
// missing or stale.
func (s *server) serveModel(w http.ResponseWriter, r *http.Request, name string) {
	if s.model == nil {
		http.Error(w, "no model: start tessera serve with --model DIR", http.StatusNotFound)
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Content-Type", contentType(name))
	if name == manifestName && s.manifest != nil {
		s.serveBody(w, r, s.memBody("model", name, s.manifest))
		return
	}
	if s.only != "" && name != s.only {
		http.NotFound(w, r)
		return
	}
	f, st, ok := openRegular(s.model, name)
	if !ok {
		http.NotFound(w, r)
		return
	}
	defer f.Close()
	// Large weights may take a while: allow 10 MB/s on top of a minute.
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(time.Minute + time.Duration(st.Size()/(10<<20))*time.Second))
	s.serveBody(w, r, fileBody("model", name, f, st))
}

// Bounds of the gzip copies kept in memory. Below gzipMin a body fits in
// a packet or two either way: gzip's frame and the client's decoding buy
// nothing. Above gzipMax it goes out raw: each copy stays in memory for
// the server's life, and gzip.BestCompression takes seconds per 10 MB
// that the first request may wait for. What a page downloads as text
// (its scripts, wasm_exec.js, tokenizer.json at 0.1–10 MB, the engine
// bundles at about 10 MB) is well below the cap; weights are never
// compressed at all.
const (
	gzipMin = 1 << 10
	gzipMax = 64 << 20
)

// compressible reports whether a file of this name is sent gzip-compressed
// to clients that accept it: text (page files, JSON, templates) and the
// engine bundles. Weights (.safetensors, .gguf, .bin), images and unknown
// types always go out raw and byte-exact: the worker reads weights with
// HTTP Range requests, and they hardly shrink.
func compressible(name string) bool {
	switch path.Ext(name) {
	case ".html", ".js", ".mjs", ".css", ".svg", ".json", ".jinja", ".txt", ".wasm":
		return true
	}
	return false
}

// body is a response body: a file of one of the roots, or bytes in memory.
type body struct {
	key  string        // what its gzip copy is kept under: root/name
	name string        // the served name; its extension says whether it is compressible
	tag  string        // validator of the raw bytes, unquoted; the gzip form's is tag+"-gz"
	mod  time.Time     // Last-Modified
	size int64         // of the raw bytes
	r    io.ReadSeeker // the raw bytes
	gz   io.ReadSeeker // its gzip form at hand (NAME.gz beside a bundle), or nil
}

// fileBody is the body of file f (st) served as name from root: its
// validator is its size and modification time, so that a file changed on
// disk gets a new ETag and a new gzip copy.
func fileBody(root, name string, f io.ReadSeeker, st fs.FileInfo) body {
	return body{key: root + "/" + name, name: name, tag: fmt.Sprintf("%x-%x", st.Size(), st.ModTime().UnixNano()),
		mod: st.ModTime(), size: st.Size(), r: f}
}

// memBody is the body of bytes b held for the server's life (they never
// change while it runs): validated by their size and the start time.
func (s *server) memBody(root, name string, b []byte) body {
	return body{key: root + "/" + name, name: name, tag: fmt.Sprintf("%x-%x", len(b), s.started.UnixNano()),
		mod: s.started, size: int64(len(b)), r: bytes.NewReader(b)}
}

// serveBody serves b with ranges and conditional requests
// (http.ServeContent), raw with ETag "tag", or, when b is compressible,
// not tiny and the client accepts gzip, gzip-compressed with ETag
// "tag-gz": b.gz, else a copy compressed once in memory (gzipped). A
// compressible body always carries Vary: Accept-Encoding, so caches keep
// the two forms apart. A Range request gets raw bytes: a range of the gzip
// stream cannot be decoded alone, and the worker checks each range it
// reads against the sha256 of the raw bytes.
func (s *server) serveBody(w http.ResponseWriter, r *http.Request, b body) {
	h := w.Header()
	if compressible(b.name) {
		h.Set("Vary", "Accept-Encoding")
		if b.size >= gzipMin && r.Header.Get("Range") == "" && acceptsGzip(r.Header.Get("Accept-Encoding")) {
			gz := b.gz
			if gz == nil {
				gz = s.gzipped(b)
			}
			if gz != nil {
				h.Set("Content-Encoding", "gzip")
				h.Set("ETag", `"`+b.tag+`-gz"`)
				http.ServeContent(w, r, b.name, b.mod, gz)
				return
			}
		}
	}
	h.Set("ETag", `"`+b.tag+`"`)
	http.ServeContent(w, r, b.name, b.mod, b.r)
}

// gzCopy is the gzip form of one served file, made in memory, and the
// validator of the bytes it was made from.
type gzCopy struct {
	mu   sync.Mutex // held while compressing: once per file, other files do not wait
	tag  string
	data []byte // nil: the bytes do not shrink
}

// gzipped returns the gzip form (gzip.BestCompression) of b, compressed
// on first use and kept under b.key until b.tag changes, or nil when b is
// outside [gzipMin, gzipMax], cannot be read whole or does not shrink. It
// leaves b.r at its start.
func (s *server) gzipped(b body) io.ReadSeeker {
	if b.size < gzipMin || b.size > gzipMax {
		return nil
	}
	s.gzMu.Lock()
	c := s.gz[b.key]
	if c == nil {
		if s.gz == nil {
			s.gz = map[string]*gzCopy{}
		}
		c = &gzCopy{}
		s.gz[b.key] = c
	}
	s.gzMu.Unlock()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tag != b.tag {
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression) // valid level: no error
		n, err := io.Copy(zw, b.r)
		if err == nil {
			err = zw.Close()
		}
		if _, serr := b.r.Seek(0, io.SeekStart); err != nil || serr != nil || n != b.size {
			return nil // unreadable, or changed while read: raw now, try again next time
		}
		c.tag, c.data = b.tag, buf.Bytes()
		if int64(len(c.data)) >= b.size {
			c.data = nil
		}
	}
	if c.data == nil {
		return nil
	}
	return bytes.NewReader(c.data)
}

// warmGzip makes the gzip copies of the compressible files names of root
// (under key prefix pre) ahead of the first request for them.
func (s *server) warmGzip(root *os.Root, pre string, names ...string) {
	for _, n := range names {
		if !compressible(n) {
			continue
		}
		if f, st, ok := openRegular(root, n); ok {
			s.gzipped(fileBody(pre, n, f, st))
			f.Close()
		}
	}
}

// acceptsGzip parses Accept-Encoding for gzip with a non-zero quality.
func acceptsGzip(ae string) bool {
	for _, part := range strings.Split(ae, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if !strings.EqualFold(strings.TrimSpace(name), "gzip") {
			continue
		}
		for _, p := range strings.Split(params, ";") {
			k, v, _ := strings.Cut(p, "=")
			if strings.EqualFold(strings.TrimSpace(k), "q") {
				q, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				return err == nil && q > 0
			}
		}
		return true
	}
	return false
}

// openRegular opens name below root when it is a regular file (no
// directories, devices or links leading out of the root).
func openRegular(root *os.Root, name string) (*os.File, fs.FileInfo, bool) {
	if name == "" || !fs.ValidPath(name) {
		return nil, nil, false
	}
	f, err := root.Open(name)
	if err != nil {
		return nil, nil, false
	}
	st, err := f.Stat()
	if err != nil || !st.Mode().IsRegular() {
		f.Close()
		return nil, nil, false
	}
	return f, st, true
}

// defaultWasmDir is bin/wasm next to the tessera binary (where `make wasm`
// writes), else ./bin/wasm, else "".
func defaultWasmDir() string {
	var dirs []string
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Join(filepath.Dir(exe), "wasm"))
	}
	dirs = append(dirs, filepath.Join("bin", "wasm"))
	for _, d := range dirs {
		if st, err := os.Stat(filepath.Join(d, wasmName)); err == nil && st.Mode().IsRegular() {
			return d
		}
	}
	return ""
}

// newHTTPServer wraps h with the timeouts tessera serve uses.
func newHTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      2 * time.Minute, // model files extend their own deadline
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
	}
}

func cmdServe(args []string, stdout, stderr io.Writer) error {
	fl := newFlags("serve", "[--addr 127.0.0.1:8080] [--model DIR] [--wasm DIR] [API flags]", stderr)
	addr := fl.String("addr", "127.0.0.1:8080", "listen address (host:port; another than loopback needs --api-key)")
	modelDir := fl.String("model", "", "model directory served under /model/ and by the OpenAI-compatible API under /v1/")
	wasmDir := fl.String("wasm", "", "directory with tessera.wasm and wasm_exec.js (default: bin/wasm next to the binary, as \"make wasm\" writes)")
	webDir := fl.String("web", "", "serve the page files from this directory instead of the embedded copy (development)")
	backend := fl.String("backend", "cpu", "where the API runs the model: cpu, gpu or auto")
	parallel := fl.Int("parallel", 1, "API generations at once (CPU; the GPU runs one)")
	exact := fl.Bool("exact", false, exactHelp)
	prefix := fl.String("prefix-cache", "256M", "memory for the prefix cache: states of earlier prompts reused by later ones (0: off)")
	apiKey := fl.String("api-key", "", "require Authorization: Bearer KEY on /v1/ (needed to listen beyond loopback)")
	maxBody := fl.String("max-body", "32M", "largest API request body (images travel inline as data: URLs)")
	maxQueue := fl.Int("max-queue", 64, "API requests that may wait for a free sequence; more get 429")
	ctxLen := fl.Int("ctx", 32768, "tokens of prompt + max_tokens per API request (at most the model's context)")
	maxOut := fl.Int("max-tokens", 4096, "largest max_tokens of an API request (also its default)")
	if err := parseFlags(fl, args); err != nil {
		return err
	}
	if fl.NArg() > 0 {
		fl.Usage()
		return fmt.Errorf("unexpected argument %q: %w", fl.Arg(0), errUsage)
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil {
		return fmt.Errorf("--addr %q: %v: %w", *addr, err, errUsage)
	}
	loopback := loopbackHost(host)
	if !loopback && *apiKey == "" {
		return fmt.Errorf("--addr %s is not a loopback address: anyone who can reach it could use the model; pass --api-key KEY to require it on /v1/ (the page and model files stay public)", *addr)
	}
	if !loopback {
		fmt.Fprintf(stderr, "tessera serve: warning: %s is not a loopback address: anyone who can reach it can download the page and the model\n", host)
	}
	cacheBytes, err := engine.ParseBytes(*prefix)
	if err != nil {
		return fmt.Errorf("--prefix-cache: %v", err)
	}
	bodyBytes, err := engine.ParseBytes(*maxBody)
	if err != nil || bodyBytes < 1 {
		return fmt.Errorf("--max-body %q: want a positive byte count", *maxBody)
	}
	if *parallel < 1 || *maxQueue < 0 || *ctxLen < 2 || *maxOut < 1 {
		return fmt.Errorf("--parallel and --max-tokens must be ≥ 1, --max-queue ≥ 0 and --ctx ≥ 2: %w", errUsage)
	}
	if *wasmDir == "" {
		*wasmDir = defaultWasmDir()
		if *wasmDir == "" {
			fmt.Fprintf(stderr, "tessera serve: warning: no %s found next to the binary or in ./bin/wasm: run \"make wasm\" or pass --wasm DIR\n", wasmName)
		}
	}
	cfg := serveConfig{ModelDir: *modelDir, WasmDir: *wasmDir, WebDir: *webDir, Loopback: loopback, Log: stderr}
	if *modelDir != "" {
		e, err := openEngine(*modelDir, engine.OpenOptions{Backend: *backend, Parallel: *parallel, PrefixCache: cacheBytes,
			MaxContext: *ctxLen, Exact: *exact}, stderr)
		if err != nil {
			return err
		}
		defer e.Close()
		cfg.API = api.New(e, api.Config{ModelID: modelID(*modelDir), APIKey: *apiKey, MaxBody: bodyBytes, MaxQueue: *maxQueue,
			Context: min(*ctxLen, e.Cfg.MaxPositions), MaxOutput: *maxOut})
	}
	s, err := newServer(cfg)
	if err != nil {
		return err
	}
	defer s.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := newHTTPServer(s)
	url := "http://" + ln.Addr().String() + "/"
	fmt.Fprintf(stdout, "tessera serve: open %s", url)
	if *modelDir != "" {
		fmt.Fprintf(stdout, " (model %s; OpenAI-compatible API at %sv1, model %q)", *modelDir, url, modelID(*modelDir))
	}
	fmt.Fprintln(stdout)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return srv.Shutdown(sctx)
}

// modelID is the model name the API answers to: the model directory's
// (or GGUF file's) base name.
func modelID(dir string) string {
	return strings.TrimSuffix(filepath.Base(filepath.Clean(dir)), ".gguf")
}
