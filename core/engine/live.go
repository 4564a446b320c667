package engine

import (
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
)

// LiveView collects what a live routing/state view draws (the desktop's
// panels, the page's canvas): expert routing over the last N tokens of
// every MoE layer, the KDA state norms, the MLA cache size and which
// backend ran each step. Generate fills it when Options.Live is set, on
// the CPU and on the GPU backend; the generating goroutine writes and the
// UI reads a copy (View) under the mutex.
type LiveView struct {
	mu      sync.Mutex
	kinds   []config.LayerKind
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
	xc      *ExpertCacheView
}

// NewLiveView sizes a live view for cfg with a routing window of n tokens
// and a step history of steps entries.
func NewLiveView(cfg *config.Config, n, steps int) *LiveView {
	v := &LiveView{n: max(n, 1), e: cfg.NumExperts, k: cfg.TopK, maxStep: max(steps, 1), maxHist: 96, kinds: cfg.Kinds}
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
	v.xc = nil
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

// SetExpertCache records the expert cache's figures for the view (the
// expert-streaming cache reports them; nil: every expert is resident).
func (v *LiveView) SetExpertCache(c *ExpertCacheView) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.xc = c
}

// ExpertCacheView is the expert cache's line of the live view: filled when
// experts are streamed from storage instead of held resident.
type ExpertCacheView struct {
	HitRate       float64 `json:"hitRate"`       // fraction of expert uses served from the cache
	BytesPerToken float64 `json:"bytesPerToken"` // expert bytes uploaded per decoded token
}

// LiveSnapshot is a consistent copy of the live view for one frame (the
// page receives it as JSON).
type LiveSnapshot struct {
	Window  int                `json:"window"` // N
	Tokens  int                `json:"tokens"` // tokens in the window (≤ N)
	E       int                `json:"experts"`
	K       int                `json:"topK"`
	Rows    []int              `json:"rows"`   // MoE layer of each heatmap row
	Load    []float64          `json:"load"`   // [rows, E] fraction of window tokens that chose the expert
	MaxVio  []float64          `json:"maxVio"` // per row: (max count − mean)/mean
	Steps   []StepInfo         `json:"steps"`
	Norms   [][]float64        `json:"norms"` // per layer history; empty for MLA layers
	Last    StepInfo           `json:"last"`
	Kinds   []config.LayerKind `json:"kinds"`
	Target  float64            `json:"target"` // K/E: the load Quantile Balancing trains every expert to
	BandLo  float64            `json:"bandLo"` // target − 2σ of a balanced router over the window
	BandHi  float64            `json:"bandHi"` // target + 2σ
	HasMoE  bool               `json:"hasMoE"`
	HasData bool               `json:"hasData"`
	// ExpertCache is the expert cache's hit rate and upload traffic when
	// experts are streamed (nil: all resident).
	ExpertCache *ExpertCacheView `json:"expertCache,omitempty"`
}

// View copies the live view.
func (v *LiveView) View() LiveSnapshot {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := LiveSnapshot{Window: v.n, Tokens: min(v.head, v.n), E: v.e, K: v.k, Rows: v.rows,
		Steps: append([]StepInfo(nil), v.steps...), Last: v.last, Kinds: v.kinds,
		HasMoE: len(v.rows) > 0 && v.e > 0, HasData: v.head > 0, ExpertCache: v.xc}
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
		s.Norms[i] = append([]float64{}, h...)
	}
	return s
}

// StepInfo describes one forward step and the sequence state after it.
type StepInfo struct {
	Backend string        `json:"backend"` // which backend ran the step ("CPU", "WebGPU")
	Tokens  int           `json:"tokens"`  // tokens the step processed (prompt length, or 1)
	Dur     time.Duration `json:"durNs"`   // wall time of the step including sampling
	Pos     int           `json:"pos"`     // tokens in the sequence after the step
	// KDANorm is, per layer, the Frobenius norm of the KDA recurrent state
	// S [H, dk, dv]; NaN (null in JSON) for MLA layers.
	KDANorm     Floats `json:"kdaNorm"`
	CacheTokens int    `json:"cacheTokens"` // tokens held in the MLA latent caches (per layer)
	CacheBytes  int64  `json:"cacheBytes"`  // bytes allocated by all MLA latent caches
	StateBytes  int64  `json:"stateBytes"`  // all per-sequence state: KDA states, conv tails, caches
}

// Floats marshals NaN as null (JSON has no NaN).
type Floats []float64

// MarshalJSON writes the values with NaN as null.
func (f Floats) MarshalJSON() ([]byte, error) {
	b := []byte{'['}
	for i, x := range f {
		if i > 0 {
			b = append(b, ',')
		}
		if math.IsNaN(x) || math.IsInf(x, 0) {
			b = append(b, "null"...)
			continue
		}
		b = strconv.AppendFloat(b, x, 'g', 6, 64)
	}
	return append(b, ']'), nil
}

// LiveBackend is a generation backend that reports what a LiveView draws
// itself (the GPU runner keeps its state on the device); the CPU runner's
// model.State is read directly.
type LiveBackend interface {
	// SetRouteHook makes every forward step report the experts each MoE
	// layer chose (experts[t·K+k], valid during the call); nil stops it.
	SetRouteHook(h func(layer int, experts []int, T, K int)) error
	// KDANorms writes the Frobenius norm of each layer's KDA state into
	// dst (NaN for other layers).
	KDANorms(dst []float64) error
	// LiveMemory is the MLA caches' tokens and bytes and all state bytes.
	LiveMemory() (cacheTokens int, cacheBytes, stateBytes int64)
}

// liveRecorder feeds Options.Live during one generation.
type liveRecorder struct {
	v       *LiveView
	backend string // "CPU" or "WebGPU"
	last    time.Time
	pos     int
}

// hookRoutes makes the session's backend report its routing to h (the
// CPU runner's RouteHook, or a LiveBackend's; nothing for a backend that
// cannot) and returns the function that unhooks it.
func hookRoutes(sess *generate.Session, h func(layer int, experts []int, T, K int)) (func(), error) {
	if r := sess.Runner(); r != nil {
		r.RouteHook = func(layer int, experts []int, _ []float32, T, K int) { h(layer, experts, T, K) }
		return func() { r.RouteHook = nil }, nil
	}
	if b, ok := sess.B.(LiveBackend); ok {
		if err := b.SetRouteHook(h); err != nil {
			return func() {}, err
		}
		return func() { _ = b.SetRouteHook(nil) }, nil
	}
	return func() {}, nil
}

// step records the step that just ended.
func (l *liveRecorder) step(sess *generate.Session, layers int) {
	var info StepInfo
	switch st := sess.State().(type) {
	case *model.State:
		info = cpuStep(st)
	default:
		info = StepInfo{Pos: st.Pos(), KDANorm: make([]float64, layers)}
		for i := range info.KDANorm {
			info.KDANorm[i] = math.NaN()
		}
		if b, ok := sess.B.(LiveBackend); ok {
			_ = b.KDANorms(info.KDANorm) // a failed read leaves NaNs; the step itself reports errors
			info.CacheTokens, info.CacheBytes, info.StateBytes = b.LiveMemory()
		}
	}
	now := time.Now()
	info.Backend, info.Tokens, info.Dur = l.backend, info.Pos-l.pos, now.Sub(l.last)
	l.pos, l.last = info.Pos, now
	l.v.Stepped(info)
}

// cpuStep measures a CPU sequence state.
func cpuStep(st *model.State) StepInfo {
	info := StepInfo{Pos: st.N, KDANorm: make([]float64, len(st.Layers)), StateBytes: st.Bytes()}
	for i, k := range st.Layers {
		if k == nil {
			info.KDANorm[i] = math.NaN()
			continue
		}
		var s float64
		for _, v := range k[0] { // the recurrent state
			s += float64(v) * float64(v)
		}
		info.KDANorm[i] = math.Sqrt(s)
	}
	for _, c := range st.Caches {
		if c != nil {
			info.CacheTokens = max(info.CacheTokens, c.Len())
			info.CacheBytes += c.Bytes()
		}
	}
	return info
}
