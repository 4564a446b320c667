//go:build cgo && !js

package wgsl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/wgsl"
)

// overlapChecker collects every dispatch whose storage bindings overlap
// within one buffer while one of them is writable, which WebGPU forbids
// (Chromium: "Writable storage buffer binding aliasing"); native wgpu
// accepts it, so only this test keeps the browser path valid.
type overlapChecker struct {
	dispatches int
	bad        []string
}

func (c *overlapChecker) check(kernel string, binds []wgsl.BindingForTest) {
	c.dispatches++
	for i, a := range binds {
		for _, b := range binds[i+1:] {
			if a.Buffer != b.Buffer || !(a.Writable || b.Writable) {
				continue
			}
			if a.Offset < b.Offset+b.Size && b.Offset < a.Offset+a.Size && len(c.bad) < 20 {
				c.bad = append(c.bad, fmt.Sprintf("%s: bindings %d [%d, +%d) and %d [%d, +%d) of buffer %d",
					kernel, a.Index, a.Offset, a.Size, b.Index, b.Offset, b.Size, a.Buffer))
			}
		}
	}
}

func (c *overlapChecker) report(t *testing.T) {
	t.Helper()
	if c.dispatches == 0 {
		t.Fatal("no dispatch was traced")
	}
	if len(c.bad) > 0 {
		t.Fatalf("%d dispatches alias a writable storage binding (WebGPU validation error):\n%s", len(c.bad), strings.Join(c.bad, "\n"))
	}
	t.Logf("%d dispatches, no aliasing storage bindings", c.dispatches)
}

// TestNoAliasingBindings runs every conformance case (in-place ops, two
// operands in one buffer, placeholders) and whole-model prefill and decode
// with a trace of every dispatch's storage bindings, and fails if any
// dispatch binds overlapping ranges of one buffer with a writable binding.
func TestNoAliasingBindings(t *testing.T) {
	d := device(t)
	var c overlapChecker
	defer d.TraceBindingsForTest(c.check)()
	t.Run("conformance", func(t *testing.T) { runCases(t, false) })
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		m := presetModel(t, preset, 1, safetensors.BF16)
		r, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 64})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Greedy([]int{1, 2, 3, 4, 5, 6, 7}); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			if _, err := r.Greedy([]int{9 + i}); err != nil {
				t.Fatal(err)
			}
		}
		r.Close()
	}
	c.report(t)
}
