package engine

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
)

// OpenOptions configure Open.
type OpenOptions struct {
	// Backend is "cpu" (the default), "gpu" (WebGPU: Vulkan, Metal or
	// DX12; an error without a usable adapter) or "auto": the GPU when
	// wgsl.ChooseAuto accepts its adapter (a real GPU, not a software one
	// such as llvmpipe, slower than the CPU backend) and the model fits,
	// else the CPU, saying which and why in one line on Log.
	Backend string
	// Chunk is the prefill piece size in tokens (64).
	Chunk int
	// MaxContext sizes the GPU runner's latent caches (tokens; 4096).
	MaxContext int
	// Parallel is how many generations may run at once on the CPU (1);
	// the GPU runs one.
	Parallel int
	// PrefixCache is the prefix cache's byte budget (0: no cache).
	PrefixCache int64
	// Log receives the backend choice (nil: discarded).
	Log io.Writer
	// Quiet leaves out the line naming the GPU adapter.
	Quiet bool
	// GPUMemory is the GPU memory budget (ParseGPUMemory: "6G", "512MiB",
	// or "50%" of the routed experts); "" takes GPUMemEnv. A model over
	// it streams its routed experts; one whose dense part does not fit
	// is refused (backend gpu) or runs on the CPU (auto).
	GPUMemory string
	// CPUMoELayers computes the routed experts of the first N MoE layers
	// on the CPU while the rest of the model runs on the GPU (llama.cpp's
	// --n-cpu-moe; wgsl.RunnerOptions.CPUMoELayers).
	CPUMoELayers int
	// Exact has the CPU multiply block-format (quantized) weights in
	// float32 on their dequantized values, as the GPU backends (native
	// and in the browser) always do, instead of rounding the activations
	// to int8 per block for its integer kernels as llama.cpp does
	// (core/ref/actq8.go). The rounding moves logits by about 1e-2, enough
	// to flip a near-tied expert choice or token, so greedy tokens on the
	// CPU part from the GPU's after a few to a few dozen; with Exact the
	// backends agree to float32 rounding and give the same greedy tokens,
	// with the CPU at its float32 kernels' speed (slower than the integer
	// ones). Process-wide (SetExact); ExactEnv=1 sets it too.
	Exact bool
}

// ExactEnv set to 1 turns OpenOptions.Exact on for every engine.
const ExactEnv = "TESSERA_EXACT"

// Int8KernelsEnv names the CPU's integer-path kernel set for every engine
// (ref.Int8Kernels: "amx", "vnni", "avx2", "go"; under js/wasm "simd128",
// "go"; the fastest by default). The sets give the same integer sums and
// differ in the order of the float32 additions: "go" gives the bits of the
// browser's CPU path (whose SIMD128 kernels give the "go" kernels' bits).
const Int8KernelsEnv = "TESSERA_INT8_KERNELS"

// SetExact turns exact products (OpenOptions.Exact) on for the process:
// the CPU then multiplies block-format weights in float32 as the GPU does
// (ref.SetInt8Activations(false)). It is not turned off again.
func SetExact() { ref.SetInt8Activations(false) }

// uploadFault, if set (tests), is the GPU runner's UploadFault.
var uploadFault func(layer, expert int) error

// CheckBackend validates a backend name.
func CheckBackend(b string) error {
	switch b {
	case "cpu", "gpu", "auto":
		return nil
	}
	return fmt.Errorf("--backend %q: want cpu, gpu or auto", b)
}

// Open loads a model directory (config.json + safetensors, memory-mapped)
// or a GGUF file with its tokenizer, after checking that it fits in the
// memory available (CheckMemory), on the backend o chooses.
func Open(dir string, o OpenOptions) (*Engine, error) {
	if o.Backend == "" {
		o.Backend = "cpu"
	}
	if o.Exact || os.Getenv(ExactEnv) == "1" {
		SetExact()
	}
	if k := os.Getenv(Int8KernelsEnv); k != "" {
		if _, err := ref.SetInt8Kernels(k); err != nil {
			return nil, fmt.Errorf("%s=%s: %w", Int8KernelsEnv, k, err)
		}
	}
	if err := CheckBackend(o.Backend); err != nil {
		return nil, err
	}
	var e *Engine
	if model.IsGGUF(dir) {
		f, err := gguf.Open(dir)
		if err != nil {
			return nil, err
		}
		if e, err = fromGGUF(f, false); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
		if err := CheckMemory(e.Model, e.ck); err != nil {
			e.Close()
			return nil, err
		}
	} else {
		m, ck, err := model.OpenDir(dir)
		if err != nil {
			return nil, err
		}
		if err := CheckMemory(m, ck); err != nil {
			ck.Close()
			return nil, err
		}
		codec, err := tokenizer.LoadCodec(dir, m.Cfg.VocabSize)
		if err != nil {
			ck.Close()
			return nil, err
		}
		raw, err := os.ReadFile(filepath.Join(dir, ConfigFile))
		if err != nil {
			ck.Close()
			return nil, err
		}
		rd, err := chat.ForModel(dir)
		if err != nil {
			ck.Close()
			return nil, err
		}
		e = newEngine(m, ck, codec, raw)
		e.chat = rd
	}
	if o.Chunk > 0 {
		e.Chunk = o.Chunk
	}
	e.SetParallel(max(1, o.Parallel))
	if o.PrefixCache > 0 {
		e.Cache = NewPrefixCache(o.PrefixCache)
	}
	if o.Backend != "cpu" {
		if err := e.useNativeGPU(o); err != nil {
			e.Close()
			return nil, err
		}
	}
	return e, nil
}

// useNativeGPU moves the engine onto a wgpu-native device (o.Backend gpu
// or auto), or leaves it on the CPU under auto, saying why.
func (e *Engine) useNativeGPU(o OpenOptions) error {
	log := o.Log
	if log == nil {
		log = io.Discard
	}
	budget, err := GPUBudget()
	if o.GPUMemory != "" {
		if budget, err = ParseGPUMemory(o.GPUMemory); err != nil {
			err = fmt.Errorf("--gpu-memory: %w", err)
		}
	}
	if err != nil {
		return err
	}
	maxCtx := o.MaxContext
	if maxCtx <= 0 {
		maxCtx = 4096
	}
	quiet := o.Quiet || os.Getenv("TESSERA_GPU_QUIET") != ""
	d, err := native.OpenQuiet()
	if err == nil {
		choice := native.ChooseAuto(d)
		if o.Backend == "auto" && !choice.GPU {
			d.Close()
			fmt.Fprintf(log, "tessera: --backend auto chose the CPU: %s (--backend gpu forces it)\n", choice.Reason)
			e.Backend = CPUBackend + "; auto chose the CPU: " + choice.Reason
			return nil
		}
		var r *wgsl.Runner
		opt := budget.Options(wgsl.RunnerOptions{MaxChunk: e.Chunk, MaxContext: maxCtx, UploadFault: uploadFault, CPUMoELayers: o.CPUMoELayers})
		if r, err = wgsl.NewRunner(d, e.Model, opt); err == nil {
			e.attachGPU(d, r)
			e.CPUFallback = o.Backend == "auto"
			if s := r.ExpertStats(); s.Streaming && !quiet {
				fmt.Fprintf(log, "tessera: GPU memory budget %s: %d of %d experts per MoE layer stay on the GPU, the others are uploaded when routed\n",
					budget, s.Slots, s.Experts)
			}
			if s := r.ExpertStats(); s.CPULayers > 0 && !quiet {
				fmt.Fprintf(log, "tessera: the routed experts of %d of %d MoE layers run on the CPU\n", s.CPULayers, s.MoELayers)
			}
			// the adapter, so a silent fallback to a CPU driver such as
			// lavapipe is visible (after the upload: a failure is one line)
			switch {
			case quiet:
			case o.Backend == "auto":
				fmt.Fprintf(log, "tessera: --backend auto chose the GPU: %s\n", choice.Reason)
			default:
				fmt.Fprintf(log, "tessera: GPU adapter %s\n", d.Info())
			}
			return nil
		}
		err = fmt.Errorf("on %s: %w", d.Info(), err)
		d.Close()
	}
	if o.Backend == "gpu" {
		return fmt.Errorf("--backend gpu: %w", err)
	}
	fmt.Fprintf(log, "tessera: --backend auto chose the CPU: no usable GPU (%v)\n", err)
	e.Backend = CPUBackend + "; no usable GPU: " + err.Error()
	return nil
}

// attachGPU makes every generation run on r (one at a time: the runner
// holds one sequence) with images encoded by the GPU vision tower.
func (e *Engine) attachGPU(d *wgsl.Device, r *wgsl.Runner) {
	e.GPU, e.Dev = r, d
	e.ExpertStats, e.GPUStep = r.ExpertStats, r.Stats
	e.GPUMemory = func() *GPUMemoryUse { return GPUMemoryOf(r, e.Model) }
	e.SetParallel(1)
	e.Backend = "gpu (" + d.Info() + ")"
	e.NewSequence = func(_ *model.Model, maxContext int) (*generate.Session, func(), error) {
		if maxContext > r.MaxContext() {
			return nil, nil, fmt.Errorf("%w: %d tokens exceed the GPU runner's context of %d", ErrContext, maxContext, r.MaxContext())
		}
		return BackendSession(r, maxContext)
	}
	var tower *wgsl.VisionTower
	e.NewEncoder = func(m *model.Model) (generate.Encoder, func(), error) {
		if tower == nil {
			vt, err := m.VisionTower()
			if err != nil {
				return nil, nil, err
			}
			t, err := wgsl.NewVisionTower(d, vt, 0)
			if err != nil {
				return nil, nil, fmt.Errorf("GPU vision tower: %w", err)
			}
			tower = t
		}
		return tower, nil, nil
	}
	e.OnClose = func() {
		if tower != nil {
			tower.Close()
		}
		r.Close()
		d.Close()
		e.GPU, e.Dev, e.ExpertStats, e.GPUStep, e.GPUMemory = nil, nil, nil, nil, nil
	}
}

// Sequence is a session for direct use (benchmarks, logits dumps) with
// room for maxContext tokens, reset, and the function that gives it back.
func (e *Engine) Sequence(maxContext int) (*generate.Session, func(), error) {
	s, free, err := e.NewSequence(e.Model, maxContext)
	if err != nil {
		return nil, nil, err
	}
	if err := s.Reset(); err != nil {
		free()
		return nil, nil, err
	}
	return s, free, nil
}

// Encoder is the vision encoder of the engine's backend and the function
// that frees it.
func (e *Engine) Encoder() (generate.Encoder, func(), error) { return e.NewEncoder(e.Model) }
