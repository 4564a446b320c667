package desk

import (
	"math"
	"sync"

	"github.com/tessera-llm/tessera/core/config"
)

// LiveView collects what the live view draws: expert routing over the last
// N tokens of every MoE layer, the KDA state norms, the MLA cache size and
// which backend ran each step. It implements Probe; the generating
// goroutine writes and the UI reads a copy (View) under the mutex.
type LiveView struct {
	mu      sync.Mutex
	n       int   // routing window in tokens
	e, k    int   // experts, experts per token
	rows    []int // MoE layer (0-indexed) of each heatmap row
	rowOf   []int // heatmap row of each layer, −1 for dense layers
	ring    []int32
	counts  []int32 // [rows, E] tokens in the window that chose the expert
	head    int     // routed tokens seen since Reset
	steps   []StepInfo
	maxStep int
	norms   [][]float64 // per layer, recent KDA norms (oldest first)
	maxHist int
	last    StepInfo
}

// NewLiveView sizes a live view for cfg with a routing window of n tokens
// and a step history of steps entries.
func NewLiveView(cfg *config.Config, n, steps int) *LiveView {
	v := &LiveView{n: max(n, 1), e: cfg.NumExperts, k: cfg.TopK, maxStep: max(steps, 1), maxHist: 96}
	v.rowOf = make([]int, cfg.NumHiddenLayers)
	for i := range v.rowOf {
		v.rowOf[i] = -1
		if cfg.IsMoE(i) {
			v.rowOf[i] = len(v.rows)
			v.rows = append(v.rows, i)
		}
	}
	v.norms = make([][]float64, cfg.NumHiddenLayers)
	v.Reset()
	return v
}

// Reset forgets everything for a new generation.
func (v *LiveView) Reset() {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.ring = make([]int32, v.n*len(v.rows)*v.k)
	for i := range v.ring {
		v.ring[i] = -1
	}
	v.counts = make([]int32, len(v.rows)*v.e)
	v.head = 0
	v.steps = v.steps[:0]
	for i := range v.norms {
		v.norms[i] = v.norms[i][:0]
	}
	v.last = StepInfo{}
}

// Routed records the experts of T tokens in one MoE layer. The first MoE
// layer of a forward pass opens T new token slots, evicting the oldest.
func (v *LiveView) Routed(layer int, experts []int, T, K int) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if layer < 0 || layer >= len(v.rowOf) || v.rowOf[layer] < 0 || T <= 0 {
		return
	}
	row, width := v.rowOf[layer], len(v.rows)*v.k
	if row == 0 {
		for i := v.head + max(0, T-v.n); i < v.head+T; i++ {
			slot := v.ring[(i%v.n)*width : (i%v.n+1)*width]
			for j, e := range slot {
				if e >= 0 {
					v.counts[(j/v.k)*v.e+int(e)]--
				}
				slot[j] = -1
			}
		}
		v.head += T
	}
	for t := max(0, T-v.n); t < T; t++ {
		i := v.head - T + t
		if i < 0 {
			continue
		}
		slot := v.ring[(i%v.n)*width+row*v.k : (i%v.n)*width+(row+1)*v.k]
		for k := 0; k < min(K, v.k) && t*K+k < len(experts); k++ {
			e := experts[t*K+k]
			if e < 0 || e >= v.e {
				continue
			}
			if old := slot[k]; old >= 0 {
				v.counts[row*v.e+int(old)]--
			}
			slot[k] = int32(e)
			v.counts[row*v.e+e]++
		}
	}
}

// Stepped records one step.
func (v *LiveView) Stepped(s StepInfo) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if len(v.steps) == v.maxStep {
		copy(v.steps, v.steps[1:])
		v.steps = v.steps[:len(v.steps)-1]
	}
	v.steps = append(v.steps, s)
	for i, x := range s.KDANorm {
		if i >= len(v.norms) || math.IsNaN(x) {
			continue
		}
		h := v.norms[i]
		if len(h) == v.maxHist {
			copy(h, h[1:])
			h = h[:len(h)-1]
		}
		v.norms[i] = append(h, x)
	}
	v.last = s
}

// LiveSnapshot is a consistent copy of the live view for one frame.
type LiveSnapshot struct {
	Window  int       // N
	Tokens  int       // tokens in the window (≤ N)
	E, K    int       // experts, experts per token
	Rows    []int     // MoE layer of each heatmap row
	Load    []float64 // [rows, E] fraction of window tokens that chose the expert
	MaxVio  []float64 // per row: (max count − mean)/mean
	Steps   []StepInfo
	Norms   [][]float64 // per layer history; empty for MLA layers
	Last    StepInfo
	Kinds   []config.LayerKind
	Target  float64 // K/E: the load Quantile Balancing trains every expert to
	BandLo  float64 // target − 2σ of a balanced router over the window
	BandHi  float64 // target + 2σ
	HasMoE  bool
	HasData bool
}

// View copies the live view.
func (v *LiveView) View(kinds []config.LayerKind) LiveSnapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := LiveSnapshot{Window: v.n, Tokens: min(v.head, v.n), E: v.e, K: v.k, Rows: v.rows,
		Steps: append([]StepInfo(nil), v.steps...), Last: v.last, Kinds: kinds,
		HasMoE: len(v.rows) > 0 && v.e > 0, HasData: v.head > 0}
	s.Load = make([]float64, len(v.counts))
	s.MaxVio = make([]float64, len(v.rows))
	if s.HasMoE {
		s.Target = float64(v.k) / float64(v.e)
		sd := 0.0
		if s.Tokens > 0 {
			sd = math.Sqrt(s.Target * (1 - s.Target) / float64(s.Tokens))
		}
		s.BandLo, s.BandHi = max(0, s.Target-2*sd), min(1, s.Target+2*sd)
	}
	for r := range v.rows {
		var mx int32
		for e := 0; e < v.e; e++ {
			c := v.counts[r*v.e+e]
			mx = max(mx, c)
			if s.Tokens > 0 {
				s.Load[r*v.e+e] = float64(c) / float64(s.Tokens)
			}
		}
		if mean := float64(s.Tokens*v.k) / float64(v.e); mean > 0 {
			s.MaxVio[r] = (float64(mx) - mean) / mean
		}
	}
	s.Norms = make([][]float64, len(v.norms))
	for i, h := range v.norms {
		s.Norms[i] = append([]float64(nil), h...)
	}
	return s
}
