//go:build cgo || js

package wgsl

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// helper is one function of common.wgsl, with its comment.
type helper struct {
	name, src string
	call      *regexp.Regexp // a call of the function
}

var (
	helpersOnce sync.Once
	helpers     []helper
	helpersErr  error
)

var fnName = regexp.MustCompile(`(?m)^fn ([A-Za-z_][A-Za-z0-9_]*)\(`)

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
			m := fnName.FindAllStringSubmatch(block, -1)
			switch {
			case len(m) == 0:
				continue // the header comment
			case len(m) > 1:
				helpersErr = fmt.Errorf("wgsl: common.wgsl: one function per block, found %d in %q…", len(m), block[:min(len(block), 60)])
				return
			}
			name := m[0][1]
			helpers = append(helpers, helper{name: name, src: strings.TrimSpace(block) + "\n",
				call: regexp.MustCompile(`\b` + name + `\(`)})
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
			called := h.call.MatchString(src)
			for j := range hs {
				called = called || (use[j] && j != i && h.call.MatchString(strings.Replace(hs[j].src, "fn "+hs[j].name+"(", "", 1)))
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
