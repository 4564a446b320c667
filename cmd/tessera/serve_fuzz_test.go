package main

import (
	"bufio"
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzServeHTTP sends arbitrary request lines and headers (as a client
// writes them on the wire, parsed by net/http as the server does) to the
// handler of `tessera serve` over a model directory with symlinks out of
// the root, hidden files and a secret file next to it. The handler must
// never panic, never return the secret, and answer only GET/HEAD on
// loopback hosts with success.
func FuzzServeHTTP(f *testing.F) {
	root := f.TempDir()
	model, wasm, secret := filepath.Join(root, "model"), filepath.Join(root, "wasm"), filepath.Join(root, "secret.txt")
	var out, errb bytes.Buffer
	if code := runMain([]string{"init-random", "--config", "k3-nano", "--seed", "1", "--out", model}, &out, &errb); code != 0 {
		f.Fatalf("init-random: %s", errb.String())
	}
	for p, b := range map[string]string{
		secret:                                "SECRET",
		filepath.Join(wasm, wasmName):         "\x00asm fake module",
		filepath.Join(wasm, wasmExecName):     "// wasm_exec.js stand-in\n",
		filepath.Join(wasm, ".hidden"):        "SECRET",
		filepath.Join(model, ".hidden"):       "SECRET",
		filepath.Join(model, "sub", "x.json"): "{}",
	} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			f.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(b), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	for name, target := range map[string]string{"link-out": secret, "link-rel": "../secret.txt", "link-in": "config.json", "link-dir": "..", "link-etc": "/etc"} {
		if err := os.Symlink(target, filepath.Join(model, name)); err != nil {
			f.Fatal(err)
		}
	}
	s, err := newServer(serveConfig{ModelDir: model, WasmDir: wasm, Loopback: true})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(s.Close)

	for _, seed := range []struct{ method, target, host, hdr string }{
		{"GET", "/", "127.0.0.1:8080", ""},
		{"GET", "/model/config.json", "localhost", "Range: bytes=0-3"},
		{"GET", "/model/model.safetensors", "[::1]:80", "Range: bytes=-1,5-2,0-"},
		{"HEAD", "/tessera.wasm", "localhost", "Accept-Encoding: gzip;q=1, br"},
		{"GET", "/model/../secret.txt", "127.0.0.1", ""},
		{"GET", "/model/%2e%2e/secret.txt", "127.0.0.1", ""},
		{"GET", "/model/link-dir/secret.txt", "127.0.0.1", ""},
		{"GET", "/model/link-etc/passwd", "127.0.0.1", ""},
		{"GET", "//model//" + secret, "127.0.0.1", ""},
		{"GET", "http://127.0.0.1/model/.hidden", "127.0.0.1", ""},
		{"GET", "/model/sub/x.json?x=../../secret.txt#frag", "127.0.0.1", "If-None-Match: *"},
		{"GET", "/model/config.json", "evil.example", ""},
		{"POST", "/model/config.json", "127.0.0.1", "Content-Length: 4"},
		{"GET", "/model/config.json", "127.0.0.1", "If-Range: \"x\"\r\nRange: bytes=0-0\r\nIf-Modified-Since: Mon, 02 Jan 2006 15:04:05 GMT"},
		{"GET", "*", "127.0.0.1", ""},
		{"GET", "/wasm_exec.js/..", "127.0.0.1", ""},
	} {
		f.Add(seed.method, seed.target, seed.host, seed.hdr)
	}
	f.Fuzz(func(t *testing.T, method, target, host, hdr string) {
		raw := method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n"
		if hdr != "" {
			raw += hdr + "\r\n"
		}
		raw += "\r\n"
		r, err := http.ReadRequest(bufio.NewReader(strings.NewReader(raw)))
		if err != nil {
			return // net/http refuses it before any handler runs
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, r)
		body, _ := io.ReadAll(w.Result().Body)
		if bytes.Contains(body, []byte("SECRET")) || bytes.Contains(body, []byte("root:")) {
			t.Fatalf("%q served %d %q", raw, w.Code, body)
		}
		if w.Code < 100 || w.Code > 599 {
			t.Fatalf("%q: status %d", raw, w.Code)
		}
		if w.Code/100 == 2 {
			if r.Method != http.MethodGet && r.Method != http.MethodHead {
				t.Fatalf("%q: method %s answered %d", raw, r.Method, w.Code)
			}
			if !loopbackHost(r.Host) {
				t.Fatalf("%q: host %q answered %d", raw, r.Host, w.Code)
			}
			if strings.Contains(r.URL.Path, "/.") || strings.Contains(r.URL.Path, "..") {
				t.Fatalf("%q: path %q answered %d", raw, r.URL.Path, w.Code)
			}
			if w.Header().Get("Content-Type") == "" {
				t.Fatalf("%q: success without a Content-Type", raw)
			}
		}
	})
}

// The server tessera serve starts bounds slow or large requests: header
// size, header/read/write/idle timeouts are all set.
func TestServeServerLimits(t *testing.T) {
	s := newHTTPServer(http.NotFoundHandler())
	if s.MaxHeaderBytes <= 0 || s.MaxHeaderBytes > 1<<20 {
		t.Errorf("MaxHeaderBytes = %d", s.MaxHeaderBytes)
	}
	for name, d := range map[string]int64{"ReadHeaderTimeout": int64(s.ReadHeaderTimeout), "ReadTimeout": int64(s.ReadTimeout), "WriteTimeout": int64(s.WriteTimeout), "IdleTimeout": int64(s.IdleTimeout)} {
		if d <= 0 {
			t.Errorf("%s is not set", name)
		}
	}
}
