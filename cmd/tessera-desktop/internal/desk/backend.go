package desk

import (
	"iter"
	"math"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// Backend runs a model for the app. The CPU reference runner is the only
// one today; the WebGPU whole-model runner being built in wgsl/ plugs in by
// implementing this interface (and reporting through the same Probe), with
// the CPU backend kept as the fallback.
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

// cpuBackend runs the model with core/model's CPU Runner.
type cpuBackend struct {
	m      *model.Model
	r      *model.Runner
	notice string
}

// NewCPUBackend wraps m in a CPU runner with prefill pieces of chunk tokens
// (as `tessera run --chunk`).
func NewCPUBackend(m *model.Model, chunk int, notice string) Backend {
	return &cpuBackend{m: m, r: model.NewRunner(m, model.Options{MaxChunk: chunk}), notice: notice}
}

// Name is "CPU".
func (b *cpuBackend) Name() string { return "CPU" }

// Notice says why the CPU runs the model.
func (b *cpuBackend) Notice() string { return b.notice }

// Config is the model's configuration.
func (b *cpuBackend) Config() *config.Config { return b.m.Cfg }

// Close stops the runner's workers.
func (b *cpuBackend) Close() { b.r.Close() }

// Vision reports whether the model has a vision tower.
func (b *cpuBackend) Vision() bool { return b.m.Vision != nil }

// Generate runs a fresh generate.Session, the same way `tessera run` does.
func (b *cpuBackend) Generate(prompt []int, images [][]byte, opt generate.Options, p Probe) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		var emb []float32
		if len(images) > 0 {
			var err error
			if prompt, emb, err = generate.Multimodal(b.r, prompt, images, imageio.Limits{}); err != nil {
				yield(-1, err)
				return
			}
		}
		sess := generate.NewSession(b.r, len(prompt)+opt.MaxTokens)
		b.r.RouteHook = func(layer int, experts []int, _ []float32, T, K int) { p.Routed(layer, experts, T, K) }
		defer func() { b.r.RouteHook = nil }()
		last, pos := time.Now(), 0
		seq := sess.Generate(prompt, opt)
		if emb != nil {
			seq = sess.GenerateEmbedded(prompt, emb, opt)
		}
		for tok, err := range seq {
			if err != nil {
				yield(-1, err)
				return
			}
			info := snapshot(sess.State().(*model.State))
			info.Backend, info.Tokens, info.Dur = b.Name(), info.Pos-pos, time.Since(last)
			pos = info.Pos
			p.Stepped(info)
			if !yield(tok, nil) {
				return
			}
			last = time.Now()
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

// gpuBackend runs the model with the WebGPU runner (state on the device);
// the live view gets the step timings, not routing or state norms, which
// stay on the GPU.
type gpuBackend struct {
	m *model.Model
	r *wgsl.Runner
	d *wgsl.Device
}

// NewGPUBackend wraps a WebGPU runner for m on device d, owning both.
func NewGPUBackend(m *model.Model, d *wgsl.Device, r *wgsl.Runner) Backend {
	return &gpuBackend{m: m, r: r, d: d}
}

func (b *gpuBackend) Name() string           { return "WebGPU" }
func (b *gpuBackend) Notice() string         { return "WebGPU · " + b.d.Info() }
func (b *gpuBackend) Config() *config.Config { return b.m.Cfg }
func (b *gpuBackend) Vision() bool           { return b.m.Vision != nil }
func (b *gpuBackend) Close()                 { b.r.Close(); b.d.Close() }

// Generate runs a fresh generate.Session on the GPU runner.
func (b *gpuBackend) Generate(prompt []int, images [][]byte, opt generate.Options, p Probe) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		var emb []float32
		if len(images) > 0 {
			tw, err := wgsl.NewVisionTower(b.d, b.m.Vision, 0)
			if err != nil {
				yield(-1, err)
				return
			}
			prompt, emb, err = generate.MultimodalWith(b.m, tw, prompt, images, imageio.Limits{})
			tw.Close()
			if err != nil {
				yield(-1, err)
				return
			}
		}
		if err := b.r.Reset(); err != nil {
			yield(-1, err)
			return
		}
		sess := generate.NewSessionOn(b.r, len(prompt)+opt.MaxTokens)
		last, pos := time.Now(), 0
		seq := sess.Generate(prompt, opt)
		if emb != nil {
			seq = sess.GenerateEmbedded(prompt, emb, opt)
		}
		for tok, err := range seq {
			if err != nil {
				yield(-1, err)
				return
			}
			n := b.r.Pos()
			p.Stepped(StepInfo{Backend: b.Name(), Tokens: n - pos, Dur: time.Since(last), Pos: n,
				KDANorm: make([]float64, len(b.m.Layers))})
			pos = n
			if !yield(tok, nil) {
				return
			}
			last = time.Now()
		}
	}
}
