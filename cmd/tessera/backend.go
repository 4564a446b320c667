package main

import (
	"fmt"
	"io"
	"os"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
)

// engine is a model ready to generate on the chosen backend.
type engine struct {
	cpu   *model.Runner // always present: the CPU runner (also encodes images)
	gpu   *wgsl.Runner  // nil on the CPU backend
	dev   *wgsl.Device
	name  string // "cpu" or "gpu"
	chunk int
	tower *wgsl.VisionTower // GPU vision tower, made on first use
}

// newEngine prepares m on backend "cpu", "gpu" or "auto". auto takes the
// GPU when wgsl.ChooseAuto accepts its adapter (a real GPU; not a software
// one such as llvmpipe, which is slower than the CPU backend) and the model
// fits, else the CPU; it says which and why in one line on stderr. gpu
// forces the adapter. maxContext sizes the GPU runner's caches.
func newEngine(m *model.Model, backend string, chunk, maxContext int, stderr io.Writer) (*engine, error) {
	if err := checkBackend(backend); err != nil {
		return nil, err
	}
	e := &engine{cpu: model.NewRunner(m, model.Options{MaxChunk: chunk}), name: "cpu", chunk: chunk}
	if backend == "cpu" {
		return e, nil
	}
	budget, err := gpuBudget()
	if err != nil {
		e.cpu.Close()
		return nil, err
	}
	quiet := os.Getenv("TESSERA_GPU_QUIET") != ""
	d, err := native.OpenQuiet()
	if err == nil {
		var choice wgsl.AutoChoice
		if choice = native.ChooseAuto(d); backend == "auto" && !choice.GPU {
			d.Close()
			fmt.Fprintf(stderr, "tessera: --backend auto chose the CPU: %s (--backend gpu forces it)\n", choice.Reason)
			return e, nil
		}
		var r *wgsl.Runner
		if r, err = wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: chunk, MaxContext: maxContext, MemoryBudget: budget}); err == nil {
			e.gpu, e.dev, e.name = r, d, "gpu"
			// the adapter, so a silent fallback to a CPU driver such as
			// lavapipe is visible (after the upload: a failure is one line)
			switch {
			case quiet:
			case backend == "auto":
				fmt.Fprintf(stderr, "tessera: --backend auto chose the GPU: %s\n", choice.Reason)
			default:
				fmt.Fprintf(stderr, "tessera: GPU adapter %s\n", d.Info())
			}
			return e, nil
		}
		err = fmt.Errorf("on %s: %w", d.Info(), err)
		d.Close()
	}
	if backend == "gpu" {
		e.cpu.Close()
		return nil, fmt.Errorf("--backend gpu: %w", err)
	}
	fmt.Fprintf(stderr, "tessera: --backend auto chose the CPU: no usable GPU (%v)\n", err)
	return e, nil
}

// session starts a sequence with room for maxContext tokens.
func (e *engine) session(maxContext int) *generate.Session {
	if e.gpu != nil {
		return generate.NewSessionOn(e.gpu, maxContext)
	}
	return generate.NewSession(e.cpu, maxContext)
}

func (e *engine) Close() {
	if e.tower != nil {
		e.tower.Close()
	}
	if e.gpu != nil {
		e.gpu.Close()
		e.dev.Close()
	}
	e.cpu.Close()
}

// encoder is the vision encoder of the engine's backend: the model's CPU
// tower on the CPU backend, the GPU tower (wgsl.VisionTower, on the
// runner's device) on the GPU backend.
func (e *engine) encoder() (generate.Encoder, error) {
	if e.gpu == nil || e.cpu.M.Vision == nil {
		return generate.CPUEncoder(e.cpu), nil
	}
	if e.tower == nil {
		t, err := wgsl.NewVisionTower(e.dev, e.cpu.M.Vision, 0)
		if err != nil {
			return nil, fmt.Errorf("GPU vision tower: %w", err)
		}
		e.tower = t
	}
	return e.tower, nil
}

func checkBackend(b string) error {
	switch b {
	case "cpu", "gpu", "auto":
		return nil
	}
	return fmt.Errorf("--backend %q: want cpu, gpu or auto", b)
}

// gpuMemEnv sets the GPU memory tessera may use (bytes, or with a K/M/G/T
// suffix): WebGPU does not report how much a device has, so without it a
// model too large for the GPU is found out when an upload fails.
const gpuMemEnv = "TESSERA_GPU_MEMORY"

func gpuBudget() (int64, error) {
	v := os.Getenv(gpuMemEnv)
	if v == "" {
		return 0, nil
	}
	n, err := parseBytes(v)
	if err != nil {
		return 0, fmt.Errorf("%s: %v (want bytes, e.g. 8G)", gpuMemEnv, err)
	}
	return n, nil
}
