package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
)

// gpuBackend runs a sequence on the WebGPU runner, which keeps the state
// on the device.
type gpuBackend struct {
	r *wgsl.Runner
	m *model.Model
}

func (g *gpuBackend) Config() *config.Config { return g.m.Cfg }
func (g *gpuBackend) MaxChunk() int          { return g.r.MaxChunk() }
func (g *gpuBackend) Pos() int               { return g.r.Pos() }
func (g *gpuBackend) Forward(tokens []int, logits []float32) error {
	return g.r.Forward(tokens, logits)
}
func (g *gpuBackend) ForwardEmbeddings([]float32, int, []float32) error {
	return errors.New("image input runs on the CPU backend only for now: use --backend cpu")
}
func (g *gpuBackend) Reset() error { return g.r.Reset() }

// engine is a model ready to generate on the chosen backend.
type engine struct {
	cpu   *model.Runner // always present: the CPU runner (also encodes images)
	gpu   *wgsl.Runner  // nil on the CPU backend
	dev   *wgsl.Device
	name  string // "cpu" or "gpu"
	chunk int
}

// newEngine prepares m on backend "cpu", "gpu" or "auto" (GPU when an
// adapter is found, else CPU with one notice line on stderr). maxContext
// sizes the GPU runner's caches.
func newEngine(m *model.Model, backend string, chunk, maxContext int, stderr io.Writer) (*engine, error) {
	if err := checkBackend(backend); err != nil {
		return nil, err
	}
	e := &engine{cpu: model.NewRunner(m, model.Options{MaxChunk: chunk}), name: "cpu", chunk: chunk}
	if backend == "cpu" {
		return e, nil
	}
	d, err := native.Open()
	if err == nil {
		var r *wgsl.Runner
		if r, err = wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: chunk, MaxContext: maxContext}); err == nil {
			e.gpu, e.dev, e.name = r, d, "gpu"
			return e, nil
		}
		d.Close()
	}
	if backend == "gpu" {
		e.cpu.Close()
		return nil, fmt.Errorf("--backend gpu: %w", err)
	}
	fmt.Fprintf(stderr, "tessera: no usable GPU (%v); running on the CPU\n", err)
	return e, nil
}

// session starts a sequence with room for maxContext tokens.
func (e *engine) session(maxContext int) *generate.Session {
	if e.gpu != nil {
		return generate.NewSessionOn(&gpuBackend{r: e.gpu, m: e.cpu.M}, maxContext)
	}
	return generate.NewSession(e.cpu, maxContext)
}

func (e *engine) Close() {
	if e.gpu != nil {
		e.gpu.Close()
		e.dev.Close()
	}
	e.cpu.Close()
}

func checkBackend(b string) error {
	switch b {
	case "cpu", "gpu", "auto":
		return nil
	}
	return fmt.Errorf("--backend %q: want cpu, gpu or auto", b)
}
