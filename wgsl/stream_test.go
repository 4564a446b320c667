//go:build cgo && !js

package wgsl_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// streamRun is the logits of a prefill in pieces of chunk tokens (every
// token's) and of greedy decode steps, with the greedy tokens.
type streamRun struct {
	logits []float32
	tokens []int
	stats  wgsl.ExpertStats
	bytes  int64
}

func runStreamed(t *testing.T, d *wgsl.Device, m *model.Model, opt wgsl.RunnerOptions, prompt []int, steps int) streamRun {
	t.Helper()
	g, err := wgsl.NewRunner(d, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	V := m.Cfg.VocabSize
	var out streamRun
	buf := make([]float32, opt.MaxChunk*V)
	for p0 := 0; p0 < len(prompt); p0 += opt.MaxChunk {
		piece := prompt[p0:min(p0+opt.MaxChunk, len(prompt))]
		if err := g.Forward(piece, buf[:len(piece)*V]); err != nil {
			t.Fatal(err)
		}
		out.logits = append(out.logits, buf[:len(piece)*V]...)
	}
	next := generate.Argmax(out.logits[len(out.logits)-V:])
	objects := -1
	for i := 0; i < steps; i++ {
		if i == 2 {
			objects = d.ObjectsForTest()
		}
		out.tokens = append(out.tokens, next)
		if err := g.Forward([]int{next}, buf[:V]); err != nil {
			t.Fatal(err)
		}
		out.logits = append(out.logits, buf[:V]...)
		next = generate.Argmax(buf[:V])
	}
	if n := d.ObjectsForTest(); steps > 2 && n != objects {
		t.Errorf("decoding created GPU objects: %d after step 2, %d after step %d", objects, n, steps)
	}
	out.stats, out.bytes = g.ExpertStats(), g.Bytes()
	return out
}

// TestExpertStreamingMatchesResident: a runner whose budget holds 50 % or
// 25 % of the routed experts (the rest streamed through its slots) gives
// the all-resident runner's logits (≤ 1e-4) and greedy tokens, for the
// trained k3-micro (64 experts, top-4) and a random config with 48
// experts; prefill pieces route to more experts than the slots hold, so
// they run in expert-major passes (and, for the random model, also in
// runs of tokens, which upload more). Its weights are smaller by exactly the
// experts left on the host, the stats count what was uploaded, and
// decoding creates no GPU objects (pipelines, bind groups). The
// random model also runs its first MoE layer's experts on the CPU
// (CPUMoELayers) with the others streamed: the same logits.
func TestExpertStreamingMatchesResident(t *testing.T) {
	d := device(t)
	micro, _, err := model.OpenDir("../models/k3-micro")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		m    *model.Model
	}{{"k3-micro", micro}, {"k3-nano-experts", presetModel(t, "testdata/k3-nano-experts.json", 3, "BF16")}} {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.m
			prompt := make([]int, 13)
			for i := range prompt {
				prompt[i] = (i*97 + 13) % m.Cfg.VocabSize
			}
			opt := wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 32}
			est := wgsl.EstimateMemory(m, opt)
			// 100 %: the resident runner itself
			opt.MemoryBudget = est.Budget(1)
			want := runStreamed(t, d, m, opt, prompt, 4)
			if s := want.stats; s.Streaming || s.Slots != est.Experts || want.bytes > est.Budget(1)*5/4 {
				t.Fatalf("100%%: %+v, %d bytes for a budget of %d", s, want.bytes, est.Budget(1))
			}
			// the first MoE layer's experts on the CPU (--n-cpu-moe 1), the
			// others streamed through a quarter of the slots (the random
			// model; core/engine runs k3-micro's experts on the CPU)
			if tc.name != "k3-micro" {
				o := opt
				o.MemoryBudget, o.CPUMoELayers, o.ExpertShare = 0, 1, 0.25
				got := runStreamed(t, d, m, o, prompt, 4)
				if s := got.stats; s.CPULayers != 1 || s.CPUTime <= 0 || !s.Streaming || s.MoELayers != est.MoELayers {
					t.Fatalf("one CPU layer: %+v", s)
				}
				if e := maxRelErr(got.logits, want.logits); e > wholeModelTol || fmt.Sprint(got.tokens) != fmt.Sprint(want.tokens) {
					t.Fatalf("one CPU layer: logits differ by %.3g, tokens %v, resident %v", e, got.tokens, want.tokens)
				}
			}
			for _, frac := range []float64{0.5, 0.25} {
				o := opt
				o.MemoryBudget = est.Budget(frac)
				got := runStreamed(t, d, m, o, prompt, 4)
				s := got.stats
				slots := max(est.TopK, int(frac*float64(est.Experts)))
				t.Logf("%.0f%%: budget %d, %d of %d experts per layer resident, hit rate %.2f, %d misses, %d bytes uploaded for %d tokens",
					100*frac, o.MemoryBudget, s.Slots, s.Experts, s.HitRate(), s.Misses, s.UploadBytes, s.Tokens)
				if e := maxRelErr(got.logits, want.logits); e > wholeModelTol {
					t.Fatalf("%.0f%%: logits differ from the resident run by %.3g", 100*frac, e)
				}
				if fmt.Sprint(got.tokens) != fmt.Sprint(want.tokens) {
					t.Fatalf("%.0f%%: tokens %v, resident %v", 100*frac, got.tokens, want.tokens)
				}
				if !s.Streaming || s.Slots != slots || s.MoELayers != est.MoELayers || s.Tokens != int64(len(prompt)+4) {
					t.Fatalf("%.0f%%: stats %+v, want %d slots in %d layers, %d tokens", 100*frac, s, slots, est.MoELayers, len(prompt)+4)
				}
				// the experts left on the host, less the slot table and the
				// masked weights, plus the smaller grouping scratch (E+1 offsets)
				saved, experts := want.bytes-got.bytes, int64((est.Experts-slots)*est.MoELayers)*est.ExpertBytes
				if saved < experts-int64(2*4*o.MaxChunk*est.TopK) || saved > experts+int64(4*est.Experts) {
					t.Errorf("%.0f%%: %d bytes fewer than resident, want %d (± scratch)", 100*frac, saved, experts)
				}
				if s.Misses == 0 || s.Hits == 0 || s.UploadBytes != s.Misses*est.ExpertBytes || s.UploadTime <= 0 {
					t.Errorf("%.0f%%: stats %+v: want hits, misses and %d bytes per miss", 100*frac, s, est.ExpertBytes)
				}
				if frac == 0.25 && tc.name != "k3-micro" { // prefill in runs of tokens instead of expert-major passes
					restore := wgsl.SetExpertMajorForTest(false)
					runs := runStreamed(t, d, m, o, prompt, 4)
					restore()
					if e := maxRelErr(runs.logits, want.logits); e > wholeModelTol || fmt.Sprint(runs.tokens) != fmt.Sprint(want.tokens) {
						t.Fatalf("25%% in runs of tokens: logits differ by %.3g, tokens %v, resident %v", e, runs.tokens, want.tokens)
					}
					if runs.stats.Misses <= s.Misses {
						t.Errorf("25%%: %d misses in runs of tokens, %d expert-major: want more", runs.stats.Misses, s.Misses)
					}
				}
			}
		})
	}
}

// A budget below the dense part with top-k experts per layer is refused,
// naming the least memory that works; a failed expert upload fails the
// step with an error naming the expert.
func TestExpertStreamingLimits(t *testing.T) {
	d := device(t)
	m := presetModel(t, "testdata/k3-nano-experts.json", 3, "BF16")
	opt := wgsl.RunnerOptions{MaxChunk: 4, MaxContext: 32}
	est := wgsl.EstimateMemory(m, opt)
	o := opt
	o.MemoryBudget = est.MinTotal() - 1
	_, err := wgsl.NewRunner(d, m, o)
	var me *wgsl.MemoryError
	if !errors.As(err, &me) || me.Min != est.MinTotal() || !strings.Contains(err.Error(), "at least") {
		t.Fatalf("budget below the minimum: %v", err)
	}
	t.Log(err)
	o.MemoryBudget = est.MinTotal()
	fault := errors.New("out of memory (injected)")
	armed := false
	o.UploadFault = func(layer, expert int) error {
		if armed {
			return fault
		}
		return nil
	}
	g, err := wgsl.NewRunner(d, m, o)
	if err != nil {
		t.Fatalf("budget at the minimum: %v", err)
	}
	defer g.Close()
	if s := g.ExpertStats(); s.Slots != est.TopK {
		t.Fatalf("minimum budget: %d slots, want %d", s.Slots, est.TopK)
	}
	if _, err := g.Greedy([]int{1, 2, 3}); err != nil {
		t.Fatal(err)
	}
	armed = true
	var err2 error
	for i := 0; i < 8 && err2 == nil; i++ { // until a step misses
		_, err2 = g.Greedy([]int{5 + i})
	}
	if !errors.Is(err2, fault) || !strings.Contains(err2.Error(), "expert streaming: upload of") {
		t.Fatalf("failed upload: %v", err2)
	}
	t.Log(err2)
}

// The budget arithmetic: slots from a budget, a share, the minimum, and
// the binding cap.
func TestMemorySlots(t *testing.T) {
	m := wgsl.Memory{Weights: 1000, State: 50, Scratch: 50, ExpertBytes: 10, Experts: 16, MoELayers: 4, TopK: 2, BindingSlots: 100}
	// routed 640, the rest 460
	for _, tc := range []struct {
		budget int64
		want   int
	}{{0, 16}, {1100, 16}, {2000, 16}, {1099, 15}, {460 + 8*40, 8}, {460 + 2*40, 2}, {460 + 2*40 - 1, 1}, {100, 0}} {
		if got := m.Slots(tc.budget); got != tc.want {
			t.Errorf("Slots(%d) = %d, want %d", tc.budget, got, tc.want)
		}
	}
	if m.MinTotal() != 540 || m.Budget(0.5) != 460+8*40 || m.Budget(1) != 1100 || m.WithSlots(16) != 1100 {
		t.Errorf("MinTotal %d, Budget(0.5) %d, Budget(1) %d", m.MinTotal(), m.Budget(0.5), m.Budget(1))
	}
	m.BindingSlots = 6
	if m.Slots(0) != 6 || m.Slots(2000) != 6 || m.Slots(460+8*40) != 6 {
		t.Errorf("binding cap of 6: Slots %d, %d, %d", m.Slots(0), m.Slots(2000), m.Slots(460+8*40))
	}
}
