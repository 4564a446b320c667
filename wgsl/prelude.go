//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"strings"
	"sync"
)

// helper is one function of common.wgsl, with its comment.
type helper struct {
	name, src string
}

// calledIn reports whether src calls h: its name, not the end of a longer
// identifier, followed by '('. (No regexp: it would add ~0.1 MB gzip to the
// browser bundle.)
func (h helper) calledIn(src string) bool {
	call := h.name + "("
	for i := 0; ; {
		j := strings.Index(src[i:], call)
		if j < 0 {
			return false
		}
		j += i
		if j == 0 || !isIdent(src[j-1]) {
			return true
		}
		i = j + 1
	}
}

// fnNames lists the functions block defines: its lines "fn NAME(".
func fnNames(block string) []string {
	var names []string
	for line := range strings.Lines(block) {
		if rest, ok := strings.CutPrefix(line, "fn "); ok {
			if name, _, ok := strings.Cut(rest, "("); ok && name != "" && strings.IndexFunc(name, func(r rune) bool { return r > 127 || !isIdent(byte(r)) }) < 0 {
				names = append(names, name)
			}
		}
	}
	return names
}

var (
	helpersOnce sync.Once
	helpers     []helper
	helpersErr  error
)

// loadHelpers splits common.wgsl into its functions (blocks separated by
// blank lines; the file's first block is its header comment).
func loadHelpers() ([]helper, error) {
	helpersOnce.Do(func() {
		src, err := shaderFS.ReadFile("common.wgsl")
		if err != nil {
			helpersErr = fmt.Errorf("wgsl: shared helpers: %w", err)
			return
		}
		for _, block := range strings.Split(string(src), "\n\n") {
			m := fnNames(block)
			switch {
			case len(m) == 0:
				continue // the header comment
			case len(m) > 1:
				helpersErr = fmt.Errorf("wgsl: common.wgsl: one function per block, found %d in %q…", len(m), block[:min(len(block), 60)])
				return
			}
			helpers = append(helpers, helper{name: m[0], src: strings.TrimSpace(block) + "\n"})
		}
	})
	return helpers, helpersErr
}

// prelude is the shared helpers src calls (directly or through another
// helper), each once, in common.wgsl's order: the loader prepends it to
// every kernel file so no kernel carries a copy of a helper.
func prelude(src string) (string, error) {
	hs, err := loadHelpers()
	if err != nil {
		return "", err
	}
	use := make([]bool, len(hs))
	for changed := true; changed; {
		changed = false
		for i, h := range hs {
			if use[i] {
				continue
			}
			called := h.calledIn(src)
			for j := range hs {
				called = called || (use[j] && j != i && h.calledIn(strings.Replace(hs[j].src, "fn "+hs[j].name+"(", "", 1)))
			}
			if called {
				use[i], changed = true, true
			}
		}
	}
	var b strings.Builder
	for i, h := range hs {
		if use[i] {
			b.WriteString(h.src)
			b.WriteString("\n")
		}
	}
	return b.String(), nil
}
