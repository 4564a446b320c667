//go:build cgo && !js

package wgsl_test

import (
	"math"
	"testing"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// A snapshot of the GPU runner's state restores exactly (the prefix cache
// resumes from it), and it has the CPU state's layout: a CPU snapshot
// restored on the GPU continues as the CPU does.
func TestRunnerSnapshotRestore(t *testing.T) {
	m := presetModel(t, "k3-nano", 1, "F32")
	g := newRunner(t, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 256})
	V := m.Cfg.VocabSize
	prefix := []int{5, 9, 2, 7, 300, 11, 42, 8, 13, 21, 34}
	rest := []int{55, 89, 144}
	forward := func(ids []int) []float32 {
		l := make([]float32, V)
		for i := 0; i < len(ids); i += 8 {
			if err := g.Forward(ids[i:min(len(ids), i+8)], l); err != nil {
				t.Fatal(err)
			}
		}
		return l
	}
	forward(prefix)
	snap, err := g.SnapshotState()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Pos != len(prefix) {
		t.Fatalf("snapshot at %d, want %d", snap.Pos, len(prefix))
	}
	want := forward(rest)
	forward([]int{1, 2, 3}) // move on, then go back
	if err := g.RestoreState(snap); err != nil {
		t.Fatal(err)
	}
	if got := forward(rest); maxAbsDiff(got, want) != 0 {
		t.Fatalf("restored run differs by %g", maxAbsDiff(got, want))
	}

	// CPU state → GPU
	r := model.NewRunner(m, model.Options{MaxChunk: 8})
	defer r.Close()
	st := m.NewState()
	cl := make([]float32, V)
	for i := 0; i < len(prefix); i += 8 {
		if err := r.Forward(st, prefix[i:min(len(prefix), i+8)], cl); err != nil {
			t.Fatal(err)
		}
	}
	if err := g.RestoreState(st.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := r.Forward(st, rest, cl); err != nil {
		t.Fatal(err)
	}
	if d := maxAbsDiff(forward(rest), cl); d > 2e-3 {
		t.Fatalf("GPU continuing a CPU snapshot differs from the CPU by %g", d)
	}
	bad := &model.Snapshot{Pos: 3, Fixed: snap.Fixed, Cache: snap.Cache}
	if err := g.RestoreState(bad); err == nil {
		t.Error("a snapshot with the wrong MLA length restored")
	}
}

func maxAbsDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}
