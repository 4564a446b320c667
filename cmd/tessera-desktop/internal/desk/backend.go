package desk

import (
	"context"
	"iter"
	"math"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
)

// Backend runs a model for the app (NewBackend: through core/engine, on
// the CPU or the WebGPU runner).
type Backend interface {
	// Name is the short name shown for each step ("CPU", "WebGPU").
	Name() string
	// Notice is shown in the header when not empty (for example why the
	// app fell back to the CPU).
	Notice() string
	// Config is the model's configuration.
	Config() *config.Config
	// Generate prefills prompt (with images: one media placeholder per
	// image, expanded and fused as `tessera run --image` does) and yields
	// sampled tokens exactly as generate.Session.Generate does; it reports
	// routing and per-step state to p as it goes. The error, if any, is
	// yielded last with −1.
	Generate(prompt []int, images [][]byte, opt generate.Options, p Probe) iter.Seq2[int, error]
	// Vision reports whether the model takes images.
	Vision() bool
	// Close releases the backend.
	Close()
}

// Probe receives the live view's data from a running backend. Its methods
// are called on the generating goroutine.
type Probe interface {
	// Routed reports the experts each of T tokens chose in MoE layer
	// layer: experts[t·K+k]. The slice is only valid during the call.
	Routed(layer int, experts []int, T, K int)
	// Stepped reports one step (the prefill, or one decoded token).
	Stepped(s StepInfo)
}

// StepInfo describes one forward step and the sequence state after it.
type StepInfo struct {
	Backend string        // which backend ran the step
	Tokens  int           // tokens the step processed (prompt length, or 1)
	Dur     time.Duration // wall time of the step including sampling
	Pos     int           // tokens in the sequence after the step
	// KDANorm is, per layer, the Frobenius norm of the KDA recurrent state
	// S [H, dk, dv]; NaN for MLA layers.
	KDANorm     []float64
	CacheTokens int   // tokens held in the MLA latent caches (per layer)
	CacheBytes  int64 // bytes allocated by all MLA latent caches
	StateBytes  int64 // all per-sequence state: KDA states, conv tails, caches
}

// engineBackend runs the model through core/engine (the engine every
// tessera front end uses): backend choice, memory checks, image fusion and
// streaming live there.
type engineBackend struct {
	e      *engine.Engine
	notice string
}

// NewBackend wraps an opened engine; notice is shown in the header.
func NewBackend(e *engine.Engine, notice string) Backend {
	return &engineBackend{e: e, notice: notice}
}

// Name is "WebGPU" when the engine runs on the GPU, else "CPU".
func (b *engineBackend) Name() string {
	if b.e.GPU != nil {
		return "WebGPU"
	}
	return "CPU"
}

// Notice says where the model runs and why.
func (b *engineBackend) Notice() string { return b.notice }

// Config is the model's configuration.
func (b *engineBackend) Config() *config.Config { return b.e.Cfg }

// Close frees the engine.
func (b *engineBackend) Close() { b.e.Close() }

// Vision reports whether the model has a vision tower.
func (b *engineBackend) Vision() bool { return b.e.Model.Vision != nil }

// Generate runs one engine generation of prompt (images placed before it
// by the engine, as `tessera run --image`), reporting routing (CPU) and
// each step's state to p.
func (b *engineBackend) Generate(prompt []int, images [][]byte, opt generate.Options, p Probe) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		eo := engine.Options{Tokens: prompt, MaxTokens: opt.MaxTokens, Sampler: opt.Sampler, NoCache: true,
			RouteHook: p.Routed}
		for _, im := range images {
			eo.Images = append(eo.Images, engine.Image{Data: im})
		}
		if eo.MaxTokens <= 0 {
			eo.MaxTokens = b.e.Cfg.MaxPositions
		}
		last, pos := time.Now(), 0
		eo.Probe = func(s *generate.Session, _ int) {
			var info StepInfo
			if st, ok := s.State().(*model.State); ok {
				info = snapshot(st)
			} else {
				info = StepInfo{Pos: s.State().Pos(), KDANorm: make([]float64, b.e.Cfg.NumHiddenLayers)}
				for i := range info.KDANorm {
					info.KDANorm[i] = math.NaN()
				}
			}
			info.Backend, info.Tokens, info.Dur = b.Name(), info.Pos-pos, time.Since(last)
			pos = info.Pos
			p.Stepped(info)
		}
		stopped := false
		_, err := b.e.Generate(context.Background(), eo, func(pc engine.Piece) bool {
			if !yield(pc.ID, nil) {
				stopped = true
				return false
			}
			last = time.Now()
			return true
		})
		if err != nil && !stopped {
			yield(-1, err)
		}
	}
}

// snapshot measures st for the live view.
func snapshot(st *model.State) StepInfo {
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
