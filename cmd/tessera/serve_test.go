package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/web"
)

// serveFixture is a model directory, a wasm directory and a secret file
// next to them that must never be served.
type serveFixture struct {
	root, model, wasm, secret string
	wasmBytes                 []byte
}

func newServeFixture(t *testing.T) serveFixture {
	t.Helper()
	root := t.TempDir()
	f := serveFixture{root: root, model: filepath.Join(root, "model"), wasm: filepath.Join(root, "wasm"), secret: filepath.Join(root, "secret.txt")}
	e2eRun(t, "init-random", "--config", "k3-nano", "--seed", "1", "--out", f.model)
	f.wasmBytes = bytes.Repeat([]byte("\x00asm fake module "), 4096)
	for p, b := range map[string][]byte{
		f.secret:                                []byte("SECRET"),
		filepath.Join(f.wasm, wasmName):         f.wasmBytes,
		filepath.Join(f.wasm, wasmExecName):     []byte("// wasm_exec.js stand-in\n"),
		filepath.Join(f.model, ".hidden"):       []byte("SECRET"),
		filepath.Join(f.model, "sub", "x.json"): []byte("{}"),
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for name, target := range map[string]string{"link-out": f.secret, "link-rel": "../secret.txt", "link-in": "config.json", "link-dir": ".."} {
		if err := os.Symlink(target, filepath.Join(f.model, name)); err != nil {
			t.Fatal(err)
		}
	}
	return f
}

func (f serveFixture) server(t *testing.T) *server {
	t.Helper()
	s, err := newServer(serveConfig{ModelDir: f.model, WasmDir: f.wasm, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

func get(s http.Handler, target string, hdr ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest("GET", target, nil)
	r.Host = "127.0.0.1:8080"
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	return w
}

func TestServeNothingOutsideTheRoots(t *testing.T) {
	f := newServeFixture(t)
	s := f.server(t)
	for _, p := range []string{
		"/model/../secret.txt", "/model/%2e%2e/secret.txt", "/model/%2E%2E%2Fsecret.txt", "/model/..%2fsecret.txt",
		"/model/..%5csecret.txt", "/model/%252e%252e/secret.txt", "/model//" + f.secret, "/model/" + f.secret,
		"/model/link-out", "/model/link-rel", "/model/link-dir/secret.txt", "/model/.hidden", "/model/sub/",
		"/model/", "/model", "/model/sub", "/model/config.json%00", "/../secret.txt", "/%2e%2e/secret.txt",
		"/wasm/../secret.txt", "/model/C:%5cWindows", "/web.go", "/.git/config",
	} {
		w := get(s, p)
		if w.Code == http.StatusOK || strings.Contains(w.Body.String(), "SECRET") {
			t.Errorf("GET %s: %d %q, want refused", p, w.Code, w.Body.String())
		}
	}
	// A symlink that stays inside the root is fine.
	if w := get(s, "/model/link-in"); w.Code != http.StatusOK {
		t.Errorf("in-root symlink: %d", w.Code)
	}
	// The same over a real connection, where nothing cleans the path first.
	ts := httptest.NewServer(s)
	defer ts.Close()
	for _, p := range []string{"/model/../secret.txt", "/model/%2e%2e/secret.txt", "/model/../../../../etc/passwd"} {
		c, err := net.Dial("tcp", ts.Listener.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(c, "GET "+p+" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		c.Close()
		if resp.StatusCode == http.StatusOK || bytes.Contains(body, []byte("SECRET")) || bytes.Contains(body, []byte("root:")) {
			t.Errorf("raw GET %s: %d %q", p, resp.StatusCode, body)
		}
	}
}

func TestServeRequestPolicy(t *testing.T) {
	f := newServeFixture(t)
	s := f.server(t)
	r := httptest.NewRequest("GET", "/", nil)
	r.Host = "evil.example:8080" // DNS rebinding
	w := httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusMisdirectedRequest {
		t.Errorf("foreign Host: %d", w.Code)
	}
	for _, h := range []string{"localhost:8080", "[::1]:8080", "127.0.0.1"} {
		r := httptest.NewRequest("GET", "/", nil)
		r.Host = h
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			t.Errorf("Host %s: %d", h, w.Code)
		}
	}
	r = httptest.NewRequest("POST", "/model/config.json", strings.NewReader("x"))
	r.Host = "127.0.0.1"
	w = httptest.NewRecorder()
	s.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != "GET, HEAD" {
		t.Errorf("POST: %d", w.Code)
	}
}

func TestServeFiles(t *testing.T) {
	f := newServeFixture(t)
	s := f.server(t)

	// The page, with its headers.
	w := get(s, "/")
	if w.Code != 200 || !strings.Contains(w.Body.String(), "<title>tessera") ||
		!strings.HasPrefix(w.Header().Get("Content-Type"), "text/html") ||
		!strings.Contains(w.Header().Get("Content-Security-Policy"), "'wasm-unsafe-eval'") ||
		w.Header().Get("X-Content-Type-Options") != "nosniff" {
		t.Errorf("GET /: %d %v", w.Code, w.Header())
	}
	for _, p := range []string{"/tessera.js", "/tessera-worker.js", "/app.js"} {
		if w := get(s, p); w.Code != 200 || !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
			t.Errorf("GET %s: %d %s", p, w.Code, w.Header().Get("Content-Type"))
		}
	}
	if w := get(s, "/index.html"); w.Code != http.StatusMovedPermanently {
		t.Errorf("/index.html: %d", w.Code)
	}
	etag := get(s, "/").Header().Get("ETag")
	if w := get(s, "/", "If-None-Match", etag); etag == "" || w.Code != http.StatusNotModified {
		t.Errorf("revalidating the page: ETag %q, %d", etag, w.Code)
	}

	// The wasm: application/wasm, gzip when accepted.
	w = get(s, "/tessera.wasm")
	if w.Code != 200 || w.Header().Get("Content-Type") != "application/wasm" || w.Header().Get("Content-Encoding") != "" ||
		!bytes.Equal(w.Body.Bytes(), f.wasmBytes) {
		t.Errorf("wasm: %d %v", w.Code, w.Header())
	}
	w = get(s, "/tessera.wasm", "Accept-Encoding", "br, gzip")
	if w.Code != 200 || w.Header().Get("Content-Encoding") != "gzip" || w.Header().Get("Vary") != "Accept-Encoding" {
		t.Fatalf("gzip wasm: %d %v", w.Code, w.Header())
	}
	zr, err := gzip.NewReader(w.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(zr)
	if !bytes.Equal(plain, f.wasmBytes) || w.Body.Len() >= len(f.wasmBytes) {
		t.Errorf("gzip wasm does not decompress to the wasm")
	}
	if w := get(s, "/tessera.wasm", "Accept-Encoding", "gzip;q=0"); w.Header().Get("Content-Encoding") != "" {
		t.Errorf("gzip;q=0 still got gzip")
	}
	// The CPU-only bundle likewise, each with its own gzip copy; a wasm
	// directory without it answers 404 (the page then loads tessera.wasm).
	if w := get(s, "/"+wasmCPUName); w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "make wasm") {
		t.Errorf("%s missing: %d %q", wasmCPUName, w.Code, w.Body.String())
	}
	cpuBytes := bytes.Repeat([]byte("\x00asm fake CPU-only module "), 2048)
	if err := os.WriteFile(filepath.Join(f.wasm, wasmCPUName), cpuBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // alternating bundles each keep their own compressed copy
		for name, want := range map[string][]byte{wasmCPUName: cpuBytes, wasmName: f.wasmBytes} {
			w := get(s, "/"+name, "Accept-Encoding", "gzip")
			zr, err := gzip.NewReader(w.Body)
			if w.Code != 200 || w.Header().Get("Content-Type") != "application/wasm" || err != nil {
				t.Fatalf("gzip %s: %d %v %v", name, w.Code, w.Header(), err)
			}
			if plain, _ := io.ReadAll(zr); !bytes.Equal(plain, want) {
				t.Errorf("gzip %s does not decompress to it", name)
			}
		}
	}
	if w := get(s, "/wasm_exec.js"); w.Code != 200 || !strings.Contains(w.Body.String(), "stand-in") {
		t.Errorf("wasm_exec.js: %d", w.Code)
	}

	// Model files: ranges, validators, cache headers; the manifest is
	// computed when the directory has none.
	cfg, _ := os.ReadFile(filepath.Join(f.model, "config.json"))
	w = get(s, "/model/config.json", "Range", "bytes=2-9")
	if w.Code != http.StatusPartialContent || w.Body.String() != string(cfg[2:10]) || w.Header().Get("Cache-Control") != "no-cache" {
		t.Errorf("range: %d %q", w.Code, w.Body.String())
	}
	if w := get(s, "/model/model.safetensors", "Range", "bytes=0-7"); w.Code != http.StatusPartialContent || w.Body.Len() != 8 {
		t.Errorf("range on weights: %d", w.Code)
	}
	w = get(s, "/model/"+manifestName)
	var mf modelManifest
	if w.Code != 200 || json.Unmarshal(w.Body.Bytes(), &mf) != nil || mf.Format != manifestFormat || len(mf.Files) != 2 {
		t.Errorf("generated manifest: %d %s", w.Code, w.Body.String())
	}
}

func TestServeWithoutModelOrWasm(t *testing.T) {
	s, err := newServer(serveConfig{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for p, want := range map[string]string{"/model/config.json": "--model", "/tessera.wasm": "make wasm"} {
		if w := get(s, p); w.Code != 404 || !strings.Contains(w.Body.String(), want) {
			t.Errorf("GET %s: %d %q, want 404 mentioning %s", p, w.Code, w.Body.String(), want)
		}
	}
	if _, err := newServer(serveConfig{ModelDir: t.TempDir()}); err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("empty model dir: %v", err)
	}
}

func TestServeCommandFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := runMain([]string{"serve", "--addr", "nonsense"}, &out, &errb); code != 2 {
		t.Errorf("bad --addr: exit %d", code)
	}
	if code := runMain([]string{"serve", "--model", filepath.Join(t.TempDir(), "missing"), "--addr", "127.0.0.1:0"}, &out, &errb); code != 1 {
		t.Errorf("missing model: exit %d", code)
	}
}

func TestCleanPathAndHosts(t *testing.T) {
	for p, ok := range map[string]bool{"/": true, "/a/b.json": true, "/model/": true, "/a/../b": false, "/a//b": false,
		"/.env": false, "/a\\b": false, "/a/./b": false, "x": false, "/a/b\x00": false} {
		if _, got := cleanPath(p); got != ok {
			t.Errorf("cleanPath(%q) = %v", p, got)
		}
	}
	for h, ok := range map[string]bool{"127.0.0.1:1": true, "localhost": true, "[::1]:80": true, "127.5.0.1": true,
		"10.0.0.1:80": false, "example.com": false, "localhost.evil.com": false} {
		if loopbackHost(h) != ok {
			t.Errorf("loopbackHost(%q) = %v", h, !ok)
		}
	}
}

// `tessera serve --model FILE.gguf` serves that one file under its name and
// its manifest as model.manifest.json (what the page's worker loads as a
// GGUF): nothing else of the file's directory, with the file's own
// FILE.gguf.manifest.json when it is there and current.
func TestServeGGUF(t *testing.T) {
	f := newServeFixture(t)
	file := filepath.Join(f.root, "m.q8_0.gguf")
	e2eRun(t, "export", "--model", f.model, "--out", file, "--type", "q8_0")
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	for _, written := range []bool{false, true} {
		if written {
			e2eRun(t, "manifest", "--model", file)
		}
		s, err := newServer(serveConfig{ModelDir: file, WasmDir: f.wasm, Loopback: true, Log: io.Discard})
		if err != nil {
			t.Fatal(err)
		}
		w := get(s, "/model/"+manifestName)
		var mf modelManifest
		if err := json.Unmarshal(w.Body.Bytes(), &mf); w.Code != 200 || err != nil || len(mf.Files) != 1 || mf.Files[0].Name != "m.q8_0.gguf" || mf.Files[0].Size != int64(len(data)) {
			t.Errorf("manifest (written %v): %d %s", written, w.Code, w.Body.String())
		}
		if w := get(s, "/model/m.q8_0.gguf"); w.Code != 200 || !bytes.Equal(w.Body.Bytes(), data) {
			t.Errorf("the GGUF file: %d, %d bytes, want %d", w.Code, w.Body.Len(), len(data))
		}
		for _, p := range []string{"/model/secret.txt", "/model/m.q8_0.gguf" + ggufManifestSuffix, "/model/model/config.json", "/model/config.json"} {
			if w := get(s, p); w.Code != 404 {
				t.Errorf("GET %s: %d, want 404", p, w.Code)
			}
		}
		s.Close()
	}
}

// gunzip decodes a gzip body, failing the test on a bad stream.
func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("bad gzip stream: %v", err)
	}
	return plain
}

// tokenizerJSON is a tokenizer.json-like document of n vocabulary entries.
func tokenizerJSON(n int) []byte {
	var b strings.Builder
	b.WriteString(`{"version":"1.0","model":{"type":"BPE","vocab":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"tok%d":%d`, i, i)
	}
	b.WriteString("}}}\n")
	return []byte(b.String())
}

// Every compressible path (page, bundle, wasm_exec.js, model text files,
// the manifest from memory) goes out gzip-compressed to a client that
// accepts gzip and raw to one that does not, with the same headers but
// for Content-Encoding and the ETag, and each form revalidates with its
// own ETag; tiny files and weights always go out raw.
func TestServeGzip(t *testing.T) {
	f := newServeFixture(t)
	execJS := bytes.Repeat([]byte("// wasm_exec.js stand-in, long enough to be worth compressing\n"), 64)
	tmpl := bytes.Repeat([]byte("{% for m in messages %}<|{{ m.role }}|>{{ m.content }}<|end|>{% endfor %}\n"), 32)
	for p, b := range map[string][]byte{
		filepath.Join(f.wasm, wasmExecName):            execJS,
		filepath.Join(f.model, "tokenizer.json"):       tokenizerJSON(4000),
		filepath.Join(f.model, "chat_template.jinja"):  tmpl,
		filepath.Join(f.model, "tokenizer_config.txt"): tmpl,
	} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	s := f.server(t)
	// The manifest computed from memory lists two files (< 1 KiB, raw); a
	// model in many shards has one worth compressing.
	big := &modelManifest{Format: manifestFormat}
	for i := range 40 {
		big.Files = append(big.Files, manifestFile{Name: fmt.Sprintf("model-%05d-of-00040.safetensors", i+1), Size: 1 << 30,
			SHA256: strings.Repeat(fmt.Sprintf("%02x", i), 32)})
	}
	small := s.manifest
	s.manifest = big.marshal()

	page := func(name string) []byte {
		b, err := fs.ReadFile(web.FS, name)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	model := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(f.model, name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	cases := []struct {
		kind, path string
		want       []byte
		gz         bool // sent gzip-compressed when accepted
		text       bool // compressible type: Vary: Accept-Encoding
	}{
		{"page", "/", page("index.html"), true, true},
		{"page", "/app.js", page("app.js"), true, true},
		{"page", "/tessera.js", page("tessera.js"), true, true},
		{"page", "/tessera-worker.js", page("tessera-worker.js"), true, true},
		{"page", "/live.js", page("live.js"), true, true},
		{"page", "/sw.js", page("sw.js"), true, true},
		{"page", "/style.css", page("style.css"), true, true},
		{"page, tiny", "/favicon.svg", page("favicon.svg"), false, true},
		{"wasm", "/" + wasmName, f.wasmBytes, true, true},
		{"exec", "/" + wasmExecName, execJS, true, true},
		{"model", "/model/config.json", model("config.json"), true, true},
		{"model", "/model/tokenizer.json", model("tokenizer.json"), true, true},
		{"model", "/model/chat_template.jinja", tmpl, true, true},
		{"model", "/model/tokenizer_config.txt", tmpl, true, true},
		{"model, tiny", "/model/sub/x.json", []byte("{}"), false, true},
		{"manifest from memory", "/model/" + manifestName, s.manifest, true, true},
		{"weights", "/model/model.safetensors", model("model.safetensors"), false, false},
	}
	for _, c := range cases {
		t.Run(c.kind+" "+c.path, func(t *testing.T) {
			plain := get(s, c.path)
			rawTag := plain.Header().Get("ETag")
			if plain.Code != 200 || plain.Header().Get("Content-Encoding") != "" || !bytes.Equal(plain.Body.Bytes(), c.want) || rawTag == "" {
				t.Fatalf("no Accept-Encoding: %d %v, %d bytes, want the %d raw bytes", plain.Code, plain.Header(), plain.Body.Len(), len(c.want))
			}
			wantVary := map[bool]string{true: "Accept-Encoding", false: ""}[c.text]
			if v := plain.Header().Get("Vary"); v != wantVary {
				t.Errorf("Vary %q, want %q", v, wantVary)
			}
			ae := []string{"Accept-Encoding", "gzip, deflate, br, zstd"}
			z := get(s, c.path, ae...)
			gzTag := z.Header().Get("ETag")
			if !c.gz {
				if z.Code != 200 || z.Header().Get("Content-Encoding") != "" || !bytes.Equal(z.Body.Bytes(), c.want) || gzTag != rawTag {
					t.Fatalf("accepting gzip: %d %v, want the raw bytes as they are", z.Code, z.Header())
				}
			} else {
				if z.Code != 200 || z.Header().Get("Content-Encoding") != "gzip" {
					t.Fatalf("accepting gzip: %d %v", z.Code, z.Header())
				}
				if got := gunzip(t, z.Body.Bytes()); !bytes.Equal(got, c.want) || z.Body.Len() >= len(c.want) {
					t.Errorf("gzip body: %d bytes decoding to %d, want fewer decoding to the %d raw bytes", z.Body.Len(), len(got), len(c.want))
				}
				if gzTag != strings.TrimSuffix(rawTag, `"`)+`-gz"` {
					t.Errorf("ETags raw %s, gzip %s: want distinct, the gzip one ending -gz", rawTag, gzTag)
				}
				for _, k := range []string{"Content-Type", "Cache-Control", "Content-Security-Policy", "X-Content-Type-Options", "Vary", "Last-Modified"} {
					if z.Header().Get(k) != plain.Header().Get(k) {
						t.Errorf("%s: %q gzip, %q raw", k, z.Header().Get(k), plain.Header().Get(k))
					}
				}
				// The raw form's ETag does not validate the gzip form.
				if w := get(s, c.path, "Accept-Encoding", "gzip", "If-None-Match", rawTag); w.Code != 200 || w.Header().Get("Content-Encoding") != "gzip" {
					t.Errorf("gzip with the raw ETag: %d, want 200 gzip", w.Code)
				}
			}
			// Each form revalidates with its own ETag.
			if w := get(s, c.path, "If-None-Match", rawTag); w.Code != http.StatusNotModified || w.Body.Len() != 0 {
				t.Errorf("If-None-Match %s without gzip: %d", rawTag, w.Code)
			}
			if w := get(s, c.path, "Accept-Encoding", "gzip", "If-None-Match", gzTag); w.Code != http.StatusNotModified || w.Body.Len() != 0 ||
				w.Header().Get("Content-Encoding") != "" {
				t.Errorf("If-None-Match %s with gzip: %d %v", gzTag, w.Code, w.Header())
			}
			// HEAD: the headers of GET, no body.
			r := httptest.NewRequest("HEAD", c.path, nil)
			r.Host = "127.0.0.1"
			r.Header.Set("Accept-Encoding", "gzip")
			w := httptest.NewRecorder()
			s.ServeHTTP(w, r)
			if w.Code != 200 || w.Body.Len() != 0 || w.Header().Get("Content-Encoding") != z.Header().Get("Content-Encoding") || w.Header().Get("ETag") != gzTag {
				t.Errorf("HEAD: %d %v, %d body bytes", w.Code, w.Header(), w.Body.Len())
			}
			// gzip refused with q=0: raw.
			if w := get(s, c.path, "Accept-Encoding", "gzip;q=0, br"); w.Header().Get("Content-Encoding") != "" || !bytes.Equal(w.Body.Bytes(), c.want) {
				t.Errorf("gzip;q=0: %v", w.Header())
			}
		})
	}
	s.manifest = small
	// Concurrent first requests share one compression and one copy.
	fresh := f.server(t)
	var wg sync.WaitGroup
	bodies := make([][]byte, 8)
	for i := range bodies {
		wg.Go(func() { bodies[i] = get(fresh, "/model/tokenizer.json", "Accept-Encoding", "gzip").Body.Bytes() })
	}
	wg.Wait()
	for _, b := range bodies {
		if !bytes.Equal(gunzip(t, b), model("tokenizer.json")) || !bytes.Equal(b, bodies[0]) {
			t.Fatal("concurrent gzip requests got different bodies")
		}
	}
	if w := get(s, "/model/"+manifestName, "Accept-Encoding", "gzip"); len(small) >= gzipMin || w.Header().Get("Content-Encoding") != "" ||
		!bytes.Equal(w.Body.Bytes(), small) || w.Header().Get("Vary") != "Accept-Encoding" {
		t.Errorf("small manifest (%d bytes): %v, want raw", len(small), w.Header())
	}
	// The in-memory wasm_exec.js of the Go toolchain, when the wasm
	// directory has none.
	bare, err := newServer(serveConfig{Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bare.Close()
	if bare.execJS != nil {
		w := get(bare, "/"+wasmExecName, "Accept-Encoding", "gzip")
		if w.Code != 200 || w.Header().Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(t, w.Body.Bytes()), bare.execJS) {
			t.Errorf("GOROOT's %s: %d %v", wasmExecName, w.Code, w.Header())
		}
		if w := get(bare, "/"+wasmExecName, "Accept-Encoding", "gzip", "If-None-Match", w.Header().Get("ETag")); w.Code != http.StatusNotModified {
			t.Errorf("GOROOT's %s revalidated: %d", wasmExecName, w.Code)
		}
	}
}

// Range requests get the raw bytes whatever Accept-Encoding says (the
// worker reads weights in ranges and checks them against the manifest);
// a file changed on disk gets a new ETag and is compressed again; a
// bundle's NAME.gz is sent when it is at least as new as the bundle.
func TestServeGzipRangesAndChanges(t *testing.T) {
	f := newServeFixture(t)
	tokPath := filepath.Join(f.model, "tokenizer.json")
	if err := os.WriteFile(tokPath, tokenizerJSON(3000), 0o644); err != nil {
		t.Fatal(err)
	}
	webDir := t.TempDir()
	appJS := bytes.Repeat([]byte("console.log('a page script from --web');\n"), 64)
	if err := os.WriteFile(filepath.Join(webDir, "app.js"), appJS, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := newServer(serveConfig{ModelDir: f.model, WasmDir: f.wasm, WebDir: webDir, Loopback: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	weights, _ := os.ReadFile(filepath.Join(f.model, "model.safetensors"))
	tok, _ := os.ReadFile(tokPath)
	for _, c := range []struct {
		path string
		raw  []byte
	}{
		{"/model/model.safetensors", weights},
		{"/model/tokenizer.json", tok},
		{"/" + wasmName, f.wasmBytes},
	} {
		for _, rg := range []struct {
			hdr      string
			from, to int
		}{{"bytes=0-7", 0, 8}, {"bytes=100-1123", 100, 1124}, {"bytes=-16", len(c.raw) - 16, len(c.raw)}} {
			w := get(s, c.path, "Accept-Encoding", "gzip", "Range", rg.hdr)
			if w.Code != http.StatusPartialContent || w.Header().Get("Content-Encoding") != "" || !bytes.Equal(w.Body.Bytes(), c.raw[rg.from:rg.to]) {
				t.Errorf("GET %s Range %s accepting gzip: %d %v, want 206 with the raw bytes", c.path, rg.hdr, w.Code, w.Header())
			}
		}
	}

	// Files changed on disk: a new ETag and a new gzip copy.
	later := time.Now().Add(time.Hour)
	for _, c := range []struct {
		path, file string
		next       []byte
	}{
		{"/model/tokenizer.json", tokPath, tokenizerJSON(3500)},
		{"/app.js", filepath.Join(webDir, "app.js"), bytes.Repeat([]byte("console.log('changed');\n"), 100)},
		{"/" + wasmName, filepath.Join(f.wasm, wasmName), bytes.Repeat([]byte("\x00asm another fake module "), 4096)},
	} {
		before := get(s, c.path, "Accept-Encoding", "gzip")
		if err := os.WriteFile(c.file, c.next, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(c.file, later, later); err != nil {
			t.Fatal(err)
		}
		after := get(s, c.path, "Accept-Encoding", "gzip")
		if after.Header().Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(t, after.Body.Bytes()), c.next) {
			t.Errorf("%s changed: %v, want the new bytes gzip-compressed", c.path, after.Header())
		}
		if tag := after.Header().Get("ETag"); tag == before.Header().Get("ETag") || !strings.HasSuffix(tag, `-gz"`) {
			t.Errorf("%s changed: ETag %s, was %s", c.path, tag, before.Header().Get("ETag"))
		}
		if w := get(s, c.path, "Accept-Encoding", "gzip", "If-None-Match", before.Header().Get("ETag")); w.Code != 200 {
			t.Errorf("%s changed, old ETag: %d, want 200", c.path, w.Code)
		}
	}

	// tessera.wasm.gz beside the bundle is sent as it is; an older one is not.
	wasmBytes, _ := os.ReadFile(filepath.Join(f.wasm, wasmName))
	var side bytes.Buffer
	zw := gzip.NewWriter(&side)
	zw.Write(wasmBytes)
	zw.Close()
	gzPath := filepath.Join(f.wasm, wasmName+".gz")
	if err := os.WriteFile(gzPath, side.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		mod  time.Time
		side bool
	}{{later.Add(time.Minute), true}, {later.Add(-time.Minute), false}} {
		if err := os.Chtimes(gzPath, c.mod, c.mod); err != nil {
			t.Fatal(err)
		}
		w := get(s, "/"+wasmName, "Accept-Encoding", "gzip")
		if w.Header().Get("Content-Encoding") != "gzip" || !bytes.Equal(gunzip(t, w.Body.Bytes()), wasmBytes) ||
			bytes.Equal(w.Body.Bytes(), side.Bytes()) != c.side {
			t.Errorf("%s.gz (sent: %v): %v, %d bytes", wasmName, c.side, w.Header(), w.Body.Len())
		}
	}
}

func TestServeAcceptsGzip(t *testing.T) {
	for ae, want := range map[string]bool{
		"": false, "gzip": true, "GZIP": true, "br, gzip": true, "gzip;q=1": true, "gzip; q=0.5": true,
		"gzip;q=0": false, "gzip;q=0.0": false, "gzip; Q=0.000": false, "deflate, gzip;q=0, br": false,
		"identity": false, "br": false, "x-gzip": false, "gzip;q=bad": false,
	} {
		if got := acceptsGzip(ae); got != want {
			t.Errorf("acceptsGzip(%q) = %v, want %v", ae, got, want)
		}
	}
}
