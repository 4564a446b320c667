package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
