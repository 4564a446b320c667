//go:build cgo || js

package wgsl

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"
)

// topDecl is a top-level declaration of a WGSL file: a function, constant
// or module-scope variable, and its name.
var topDecl = regexp.MustCompile(`(?m)^(?:fn|const|override|var(?:<[^>]*>)?) ([A-Za-z_][A-Za-z0-9_]*)\b`)

// Every shared helper is defined once, in common.wgsl: no kernel file
// carries a copy, and each kernel file gets the helpers it calls.
func TestHelpersDefinedOnce(t *testing.T) {
	hs, err := loadHelpers()
	if err != nil {
		t.Fatal(err)
	}
	if len(hs) < 6 {
		t.Fatalf("common.wgsl has %d helpers, want tanh_s, glu_act, wpair, wg_reduce, reduce_sum, reduce_max at least", len(hs))
	}
	files, err := fs.Glob(shaderFS, "*.wgsl")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if f == "common.wgsl" {
			continue
		}
		src, _ := shaderFS.ReadFile(f)
		pre, err := prelude(string(src))
		if err != nil {
			t.Fatal(err)
		}
		declared := map[string]bool{}
		for _, m := range topDecl.FindAllStringSubmatch(pre+string(src), -1) {
			if declared[m[1]] {
				t.Errorf("%s: %s is declared twice (the kernel and a helper of common.wgsl it calls)", f, m[1])
			}
			declared[m[1]] = true
		}
		for _, h := range hs {
			if strings.Contains(string(src), "fn "+h.name+"(") {
				t.Errorf("%s defines its own %s: use common.wgsl's", f, h.name)
			}
			if h.calledIn(string(src)) && !strings.Contains(pre, "fn "+h.name+"(") {
				t.Errorf("%s: %s called but not prepended", f, h.name)
			}
		}
	}
}

// The prelude holds exactly the helpers called, with their dependencies.
func TestPrelude(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []string
	}{
		{"fn main() { let x = 1.0; }", nil},
		{"fn main() { let y = tanh_s(1.0); }", []string{"tanh_s"}},
		{"fn main() { let h = glu_act(1.0, 2.0, 0u, 1.0, 0.0); }", []string{"tanh_s", "glu_act"}},
		{"fn main() { let w = wpair(0u, 1u); let t = my_tanh_s(0.0); }", []string{"wpair"}},
		{"fn main() { let s = reduce_sum(1.0, 0u); }", []string{"wg_reduce", "reduce_sum"}},
	} {
		pre, err := prelude(tc.src)
		if err != nil {
			t.Fatal(err)
		}
		hs, _ := loadHelpers()
		for _, h := range hs {
			want := false
			for _, n := range tc.want {
				want = want || n == h.name
			}
			if got := strings.Contains(pre, "fn "+h.name+"("); got != want {
				t.Errorf("%q: %s in the prelude: %v, want %v", tc.src, h.name, got, want)
			}
		}
	}
}
