package desk

import (
	"context"
	"iter"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
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
	// routing and per-step state to live as it goes (on either backend).
	// The error, if any, is yielded last with −1.
	Generate(prompt []int, images [][]byte, opt generate.Options, live *engine.LiveView) iter.Seq2[int, error]
	// Vision reports whether the model takes images.
	Vision() bool
	// Close releases the backend.
	Close()
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
func (b *engineBackend) Vision() bool { return b.e.Model.HasVision() }

// Generate runs one engine generation of prompt (images placed before it
// by the engine, as `tessera run --image`), reporting routing and each
// step's state to live (engine.Options.Live: CPU or GPU).
func (b *engineBackend) Generate(prompt []int, images [][]byte, opt generate.Options, live *engine.LiveView) iter.Seq2[int, error] {
	return func(yield func(int, error) bool) {
		eo := engine.Options{Tokens: prompt, MaxTokens: opt.MaxTokens, Sampler: opt.Sampler, NoCache: true, Live: live}
		for _, im := range images {
			eo.Images = append(eo.Images, engine.Image{Data: im})
		}
		if eo.MaxTokens <= 0 {
			eo.MaxTokens = b.e.Cfg.MaxPositions
		}
		stopped := false
		_, err := b.e.Generate(context.Background(), eo, func(pc engine.Piece) bool {
			if !yield(pc.ID, nil) {
				stopped = true
				return false
			}
			return true
		})
		if err != nil && !stopped {
			yield(-1, err)
		}
	}
}
