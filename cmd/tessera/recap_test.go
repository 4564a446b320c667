package main

import (
	"fmt"
	"sync"
	"testing"
)

// recapT is the *testing.T of a long test that, when the test fails,
// logs its failures once more as its last lines: CI shows the tail of a
// failing test's output, and a browser test's failures come minutes
// before its summary.
type recapT struct {
	*testing.T
	mu       sync.Mutex
	failures []string
}

// recapLen is the most of one failure the recap repeats.
const recapLen = 600

// withRecap wraps t; its cleanup logs the recap.
func withRecap(t *testing.T) *recapT {
	r := &recapT{T: t}
	t.Cleanup(func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if len(r.failures) == 0 {
			return
		}
		t.Logf("%d failure(s), repeated:", len(r.failures))
		for i, m := range r.failures {
			if len(m) > recapLen {
				m = m[:recapLen] + "…"
			}
			t.Logf("  %d. %s", i+1, m)
		}
	})
	return r
}

func (r *recapT) note(m string) {
	r.mu.Lock()
	r.failures = append(r.failures, m)
	r.mu.Unlock()
}

// Errorf is testing.T's, recorded for the recap.
func (r *recapT) Errorf(format string, args ...any) {
	r.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Errorf(format, args...)
}

// Error is testing.T's, recorded for the recap.
func (r *recapT) Error(args ...any) {
	r.Helper()
	r.note(fmt.Sprint(args...))
	r.T.Error(args...)
}

// Fatalf is testing.T's, recorded for the recap.
func (r *recapT) Fatalf(format string, args ...any) {
	r.Helper()
	r.note(fmt.Sprintf(format, args...))
	r.T.Fatalf(format, args...)
}

// Fatal is testing.T's, recorded for the recap.
func (r *recapT) Fatal(args ...any) {
	r.Helper()
	r.note(fmt.Sprint(args...))
	r.T.Fatal(args...)
}
