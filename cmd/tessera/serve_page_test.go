package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The references a page or script makes to its own server: attributes in
// HTML, and in JavaScript static imports, new URL(…, import.meta.url),
// here(…) (tessera.js's helper for its siblings) and the model directory.
var (
	htmlRef = regexp.MustCompile(`(?:href|src)="([^"]+)"`)
	iconRef = regexp.MustCompile(`<link[^>]*rel="(?:shortcut )?icon"`)
	jsRefs  = []*regexp.Regexp{
		regexp.MustCompile(`(?m)^\s*import\s[^'"]*from\s+'([^']+)'`),
		regexp.MustCompile(`new URL\('([^']+)', import\.meta\.url\)`),
		regexp.MustCompile(`here\('([^']+)'\)`),
		regexp.MustCompile(`new URL\('(model/)', location\.href\)`),
	}
)

// TestServePageRequestsResolve follows what the demo page asks its server
// for, as a browser loading it would, and fails on any answer but 200: the
// files index.html names, the scripts they import, the worker, wasm and
// wasm_exec.js, the model's manifest and every file it lists, and
// /favicon.ico unless the page declares an icon (browsers ask for it
// then). TestBrowserE2E checks the same in Chromium.
func TestServePageRequestsResolve(t *testing.T) {
	f := newServeFixture(t)
	// make wasm writes both bundles; tessera.js names both
	if err := os.WriteFile(filepath.Join(f.wasm, wasmCPUName), f.wasmBytes, 0o644); err != nil {
		t.Fatal(err)
	}
	s := f.server(t)
	seen := map[string]bool{}
	queue := []string{"/"}
	want := func(from, ref string) {
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "data:") || strings.HasPrefix(ref, "#") {
			return // another site, inline data, a fragment
		}
		p := "/" + strings.TrimPrefix(strings.TrimPrefix(ref, "./"), "/")
		if seen[p] {
			return
		}
		seen[p] = true
		t.Logf("%s → %s", from, p)
		if !strings.HasSuffix(p, "/") {
			queue = append(queue, p)
			return
		}
		// A model directory: the worker reads its manifest, then the files.
		w := get(s, p+manifestName)
		var mf modelManifest
		if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &mf) != nil {
			t.Errorf("GET %s%s: %d, want 200 and a manifest", p, manifestName, w.Code)
			return
		}
		seen[p+manifestName] = true
		for _, fl := range mf.Files {
			queue = append(queue, p+fl.Name)
			seen[p+fl.Name] = true
		}
	}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		w := get(s, p)
		if w.Code != http.StatusOK {
			t.Errorf("GET %s: %d %s, want 200", p, w.Code, strings.TrimSpace(w.Body.String()))
			continue
		}
		body := w.Body.String()
		switch {
		case p == "/":
			for _, m := range htmlRef.FindAllStringSubmatch(body, -1) {
				want(p, m[1])
			}
			if !iconRef.MatchString(body) {
				want(p+" (no icon declared)", "favicon.ico")
			}
		case strings.HasSuffix(p, ".js") && p != "/"+wasmExecName:
			for _, re := range jsRefs {
				for _, m := range re.FindAllStringSubmatch(body, -1) {
					want(p, m[1])
				}
			}
		}
	}
	for _, must := range []string{"/style.css", "/app.js", "/tessera.js", "/tessera-worker.js", "/" + wasmName, "/" + wasmExecName,
		"/model/" + manifestName, "/model/model.safetensors"} {
		if !seen[must] {
			t.Errorf("the crawl never reached %s: the patterns above no longer match the page", must)
		}
	}
	icon := false
	for p := range seen {
		icon = icon || strings.Contains(p, "icon")
	}
	if !icon {
		t.Error("no icon requested: the page declares none and favicon.ico was not tried")
	}
}
