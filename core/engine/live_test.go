package engine

import (
	"testing"

	"github.com/tessera-llm/tessera/core/config"
)

// The routing window keeps the last N tokens of every MoE layer, a piece
// longer than the window keeps its last N, and the band brackets the
// Quantile Balancing target.
func TestLiveViewWindow(t *testing.T) {
	cfg := &config.Config{NumHiddenLayers: 3, NumExperts: 4, TopK: 1, FirstKDenseReplace: 1, MoELayerFreq: 1}
	v := NewLiveView(cfg, 4, 8)
	// A 3-token prefill: layer 1 sends every token to expert 0, layer 2 to 3.
	v.Routed(1, []int{0, 0, 0}, 3, 1)
	v.Routed(2, []int{3, 3, 3}, 3, 1)
	// Two decode steps to expert 1 (layer 1) and 2 (layer 2): the window
	// of 4 drops the first prefill token.
	for i := 0; i < 2; i++ {
		v.Routed(1, []int{1}, 1, 1)
		v.Routed(2, []int{2}, 1, 1)
	}
	s := v.View()
	if s.Tokens != 4 || len(s.Rows) != 2 || s.Rows[0] != 1 || s.Rows[1] != 2 {
		t.Fatalf("tokens %d rows %v, want 4 and [1 2]", s.Tokens, s.Rows)
	}
	want := []float64{0.5, 0.5, 0, 0, 0, 0, 0.5, 0.5}
	for i, w := range want {
		if s.Load[i] != w {
			t.Fatalf("load %v, want %v", s.Load, want)
		}
	}
	if s.Target != 0.25 || s.MaxVio[0] != 1 {
		t.Errorf("target %v maxvio %v, want 0.25 and 1", s.Target, s.MaxVio[0])
	}
	if !(s.BandLo < s.Target && s.Target < s.BandHi) {
		t.Errorf("band [%v, %v] does not contain the target %v", s.BandLo, s.BandHi, s.Target)
	}
	// A piece longer than the window keeps only its last N tokens.
	v.Routed(1, []int{3, 3, 3, 3, 3, 3}, 6, 1)
	v.Routed(2, []int{0, 0, 0, 0, 0, 0}, 6, 1)
	s = v.View()
	if s.Load[3] != 1 || s.Load[4] != 1 || s.Load[0] != 0 {
		t.Errorf("after a long piece load %v, want all on expert 3 / expert 0", s.Load)
	}
	v.Stepped(StepInfo{Backend: "CPU", Tokens: 1, KDANorm: []float64{1, 2, 3}})
	if s := v.View(); len(s.Steps) != 1 || len(s.Norms[2]) != 1 || s.Norms[2][0] != 3 {
		t.Errorf("steps %v norms %v", s.Steps, s.Norms)
	}
	v.Reset()
	if s := v.View(); s.HasData || len(s.Steps) != 0 {
		t.Errorf("Reset left data: %+v", s)
	}
}
