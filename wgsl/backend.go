//go:build cgo || js

package wgsl

import (
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
)

// Config is the configuration of the model the runner holds; with Forward,
// ForwardEmbeddings, Pos, MaxChunk and Reset it makes a Runner a
// generate.Backend.
func (r *Runner) Config() *config.Config { return r.cfg }

// State is the runner's sequence state (generate.Backend).
func (r *Runner) State() nn.State { return (*runnerState)(r) }

// runnerState is the GPU sequence state: KDA states and conv tails and the
// MLA latent caches in GPU buffers, and the position.
type runnerState Runner

func (s *runnerState) Pos() int                     { return s.pos }
func (s *runnerState) Advance(n int)                { s.pos += n }
func (s *runnerState) Fixed(layer, i int) nn.Tensor { return nil }
func (s *runnerState) Cache(layer int) nn.Cache     { return nil }
func (s *runnerState) Reset() error                 { return (*Runner)(s).Reset() }
func (s *runnerState) Bytes() int64                 { return (*Runner)(s).StateBytes() }
