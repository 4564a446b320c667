//go:build js && wasm && !cpuonly

package main

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"syscall/js"
	"time"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/wgsl"
)

// haveGPURunner: this bundle has the WebGPU runner.
const haveGPURunner = true

// gpuBackend is the WGSL runner as a generate.Backend; the runner keeps
// the sequence state on the device.
type gpuBackend struct {
	r    *wgsl.Runner
	m    *model.Model
	dev  js.Value                // the raw GPUDevice, for error scopes
	lost *atomic.Pointer[string] // set when the device is lost
}

func (g *gpuBackend) Config() *config.Config { return g.m.Cfg }
func (g *gpuBackend) MaxChunk() int          { return g.r.MaxChunk() }
func (g *gpuBackend) State() nn.State        { return g.r.State() }

// Forward runs one step inside WebGPU error scopes: a command the browser
// rejects is an error, never logits computed from zeroed buffers.
func (g *gpuBackend) Forward(tokens []int, logits []float32) error {
	return g.scoped("forward step", func() error { return g.r.Forward(tokens, logits) })
}

// SamplesOnDevice and SampleNext pick each token on the GPU, the first
// after the prompt included (generate.DeviceSampler): one 4-byte readback
// per token.
func (g *gpuBackend) SamplesOnDevice(opt generate.SamplerOptions, vocab int) bool {
	return g.r.SamplesOnDevice(opt, vocab)
}

func (g *gpuBackend) SampleNext(tokens []int, opt generate.SamplerOptions, vocab int, u float64) (id int, err error) {
	err = g.scoped("decode step", func() (err error) {
		id, err = g.r.SampleNext(tokens, opt, vocab, u)
		return err
	})
	return id, err
}

// SampleNextEmbeddings picks the first token after a multimodal prompt
// on the GPU (generate.DeviceEmbeddingSampler).
func (g *gpuBackend) SampleNextEmbeddings(emb []float32, T int, opt generate.SamplerOptions, vocab int, u float64) (id int, err error) {
	err = g.scoped("prefill step", func() (err error) {
		id, err = g.r.SampleNextEmbeddings(emb, T, opt, vocab, u)
		return err
	})
	return id, err
}

// SetRouteHook, KDANorms and LiveMemory feed the live routing/state view
// (engine.LiveBackend) from the runner; the reads run in error scopes.
func (g *gpuBackend) SetRouteHook(h func(layer int, experts []int, T, K int)) error {
	return g.scoped("live view buffers", func() error { return g.r.SetRouteHook(h) })
}

func (g *gpuBackend) KDANorms(dst []float64) error {
	return g.scoped("live view read", func() error { return g.r.KDANorms(dst) })
}

func (g *gpuBackend) LiveMemory() (int, int64, int64) { return g.r.LiveMemory() }

// scoped is scoped on this backend's device, also failing when the device
// was lost (reads of a lost device's buffers give no data).
func (g *gpuBackend) scoped(what string, f func() error) error {
	if m := g.lost.Load(); m != nil {
		return fmt.Errorf("%w (%s)", errGPULost, *m)
	}
	err := scoped(g.dev, what, f)
	if err != nil && g.lost.Load() == nil {
		// a failed step may be the first sign of a lost device: give its
		// lost promise a moment to settle before naming the cause
		settle(g.dev.Get("lost"), 250*time.Millisecond)
	}
	if m := g.lost.Load(); m != nil {
		return fmt.Errorf("%w during the %s (%s)", errGPULost, what, *m)
	}
	return err
}

// scoped runs f with validation, out-of-memory and internal error scopes
// pushed on the raw JS device (the binding's Create* and Submit report no
// errors in the browser: webgpu.md bug 9) and returns the first WebGPU
// error reported while f ran, else f's error. A JS exception inside f
// (a Go panic in the binding) is returned as an error too.
func scoped(dev js.Value, what string, f func() error) (err error) {
	kinds := []string{"internal", "out-of-memory", "validation"}
	for _, k := range kinds {
		dev.Call("pushErrorScope", k)
	}
	ferr := func() (err error) {
		defer func() {
			if p := recover(); p != nil {
				err = fmt.Errorf("WebGPU call panicked: %v", p)
			}
		}()
		return f()
	}()
	var msgs []string
	for i := len(kinds) - 1; i >= 0; i-- { // scopes pop innermost first
		e, perr := await(dev.Call("popErrorScope"))
		switch {
		case perr != nil:
			msgs = append(msgs, "popErrorScope: "+perr.Error())
		case !e.IsNull() && !e.IsUndefined():
			msgs = append(msgs, kinds[i]+" error: "+e.Get("message").String())
		}
	}
	if len(msgs) > 0 {
		return fmt.Errorf("WebGPU rejected the GPU %s: %s", what, strings.Join(msgs, "; "))
	}
	return ferr
}

// ForwardEmbeddings is Forward for input embeddings [T, d] (image features
// fused into the prompt), inside the same error scopes.
func (g *gpuBackend) ForwardEmbeddings(emb []float32, T int, logits []float32) error {
	return g.scoped("forward step", func() error { return g.r.ForwardEmbeddings(emb, T, logits) })
}
func (g *gpuBackend) Reset() error { return g.r.Reset() }

// SnapshotState and RestoreState copy the sequence state to and from the host
// (generate.Snapshotter: the engine's prefix cache and saved
// conversations), inside the same error scopes.
func (g *gpuBackend) SnapshotState() (sn *model.Snapshot, err error) {
	err = g.scoped("state snapshot", func() (err error) {
		sn, err = g.r.SnapshotState()
		return err
	})
	return sn, err
}

func (g *gpuBackend) RestoreState(sn *model.Snapshot) error {
	return g.scoped("state restore", func() error { return g.r.RestoreState(sn) })
}

// gpuEncoder is the model's vision tower on the GPU (wgsl.VisionTower,
// on the runner's device), each image encoded inside error scopes.
type gpuEncoder struct {
	t   *wgsl.VisionTower
	dev js.Value
}

func (g gpuEncoder) Encode(px *imageio.Patches) (out []float32, err error) {
	err = scoped(g.dev, "vision tower", func() (err error) {
		out, err = g.t.Encode(px)
		return err
	})
	return out, err
}

// testDevice is the GPU device of the loaded engine (loseGPUForTest).
var testDevice js.Value

// settle waits until p settles or d has passed, whichever comes first.
func settle(p js.Value, d time.Duration) {
	timer := js.FuncOf(func(_ js.Value, a []js.Value) any {
		js.Global().Call("setTimeout", arg(a, 0), d.Milliseconds())
		return nil
	})
	defer timer.Release()
	promise := js.Global().Get("Promise")
	_, _ = await(promise.Call("race", js.ValueOf([]any{p, promise.New(timer)})))
}

// loseGPUForTest destroys the engine's GPU device, as a driver reset or
// a lost GPU would (tests of the fallback). It returns a Promise that
// resolves to whether there was a device to lose — with wait, only once
// the loss has been observed; without, at once (the next generation then
// meets the loss in the middle of a step, as with a real GPU fault).
func loseGPUForTest(wait bool) any {
	return promise(func() (any, error) {
		if testDevice.IsUndefined() || testDevice.IsNull() {
			return false, nil
		}
		lost := testDevice.Get("lost")
		testDevice.Call("destroy")
		if wait {
			// the runner's own handler was attached first, so it has run
			// when this await resumes
			if _, err := await(lost); err != nil {
				return nil, err
			}
		}
		return true, nil
	})
}

// useGPU moves e onto WebGPU: it acquires a device (requestDevice), uploads
// the weights once and makes every generation reset and reuse that runner.
// If the device is later lost, a generation in progress fails with an
// error saying so, and the next one runs on the CPU when fallback is set
// (backend "auto"), else fails likewise. e must be nil-free; on failure
// the caller reloads it for the CPU.
func useGPU(e *engine.Engine, fallback bool, budget engine.GPUMemory) (gpuInfo, error) {
	if e == nil {
		return probeGPU(), errors.New("no engine")
	}
	jsDev, info, err := requestDevice()
	if err != nil {
		return info, err
	}
	lost := new(atomic.Pointer[string])
	onLost := js.FuncOf(func(_ js.Value, a []js.Value) any {
		li := arg(a, 0)
		msg := "reason " + li.Get("reason").String()
		if m := li.Get("message"); m.Type() == js.TypeString && m.String() != "" {
			msg += ": " + m.String()
		}
		lost.Store(&msg)
		return nil
	})
	jsDev.Get("lost").Call("then", onLost)
	if js.Global().Get("wasm").IsUndefined() {
		return info, errors.New("globalThis.wasm is not set: the loader must store the instantiated module there (WebGPU buffer uploads read the wasm memory through it)")
	}
	// WebGPU reports invalid calls only as events (the js binding's
	// Create* return no errors): keep the first few for info().
	onErr := js.FuncOf(func(_ js.Value, a []js.Value) any {
		if len(gpuErrors) < 8 {
			gpuErrors = append(gpuErrors, arg(a, 0).Get("error").Get("message").String())
		}
		return nil
	})
	jsDev.Call("addEventListener", "uncapturederror", onErr)
	raw := wgpu.NewDevice(jsDev)
	desc := strings.TrimSpace(strings.Join([]string{info.Vendor, info.Architecture, info.Description}, " "))
	d, err := wgsl.NewDevice(&raw, "webgpu "+desc, func() { jsDev.Call("destroy") })
	if err != nil {
		jsDev.Call("destroy")
		return info, err
	}
	d.SetAdapter(info.adapterInfo()) // what the device's by-adapter choices read (SetRepeatFusions)
	var r *wgsl.Runner
	err = scoped(jsDev, "model upload", func() (err error) {
		r, err = wgsl.NewRunner(d, e.Model, budget.Options(wgsl.RunnerOptions{MaxChunk: 64}))
		return err
	})
	if err != nil {
		if r != nil {
			r.Close()
		}
		d.Close()
		return info, fmt.Errorf("uploading the model to the GPU: %w", err)
	}
	b := &gpuBackend{r: r, m: e.Model, dev: jsDev, lost: lost}
	// Validate once before generating (every later step is checked too).
	logits := make([]float32, e.Cfg.VocabSize)
	ferr := b.Forward([]int{0}, logits)
	if ferr == nil {
		ferr = r.Reset()
	}
	if ferr == nil && len(gpuErrors) > 0 {
		ferr = fmt.Errorf("this browser's WebGPU rejected the runner's commands (%d errors; first: %s)", len(gpuErrors), gpuErrors[0])
	}
	if ferr != nil {
		r.Close()
		d.Close()
		return info, fmt.Errorf("checking the GPU runner: %w", ferr)
	}
	// afterLoss answers a generation that starts after the device was lost.
	afterLoss := func() error {
		m := lost.Load()
		if m == nil {
			return nil
		}
		if !fallback {
			return fmt.Errorf("the GPU device was lost (%s): load the model again", *m)
		}
		return e.UseCPU("the GPU device was lost (" + *m + ")")
	}
	e.NewSequence = func(_ *model.Model, maxContext int) (*generate.Session, func(), error) {
		if lost.Load() != nil {
			if err := afterLoss(); err != nil {
				return nil, nil, err
			}
			return e.NewSequence(e.Model, maxContext) // the CPU runner now
		}
		if maxContext > r.MaxContext() {
			return nil, nil, fmt.Errorf("prompt + maxTokens = %d tokens exceed the GPU runner's context of %d", maxContext, r.MaxContext())
		}
		return engine.BackendSession(b, maxContext)
	}
	// The vision tower (if any) is uploaded on the first image and kept.
	var tower *wgsl.VisionTower
	e.NewEncoder = func(m *model.Model) (generate.Encoder, func(), error) {
		if lost.Load() != nil {
			if err := afterLoss(); err != nil {
				return nil, nil, err
			}
			return e.NewEncoder(e.Model)
		}
		if tower == nil {
			vt, err := m.VisionTower()
			if err != nil {
				return nil, nil, err
			}
			var t *wgsl.VisionTower
			err = scoped(jsDev, "vision tower upload", func() (err error) {
				t, err = wgsl.NewVisionTower(d, vt, 0)
				return err
			})
			if err != nil {
				if t != nil {
					t.Close()
				}
				return nil, nil, fmt.Errorf("uploading the vision tower to the GPU: %w", err)
			}
			tower = t
		}
		return gpuEncoder{t: tower, dev: jsDev}, nil, nil
	}
	e.Backend = "gpu (webgpu" + map[bool]string{true: ", software adapter", false: ""}[info.Fallback] + ")"
	e.ExpertStats, e.GPUStep, e.CPUFallback = r.ExpertStats, r.Stats, fallback
	e.GPUMemory = func() *engine.GPUMemoryUse { return engine.GPUMemoryOf(r, e.Model) }
	testDevice = jsDev
	e.OnClose = func() {
		if tower != nil {
			tower.Close()
		}
		r.Close()
		d.Close()
		e.ExpertStats, e.GPUStep, e.GPUMemory = nil, nil, nil
		testDevice = js.Undefined()
		onLost.Release()
	}
	return info, nil
}
