//go:build cgo || js

package wgsl

import (
	"errors"

	"github.com/tessera-llm/tessera/core/config"
)

// Config is the configuration of the model the runner holds; with Forward,
// ForwardEmbeddings, Pos, MaxChunk and Reset it makes a Runner a
// generate.Backend.
func (r *Runner) Config() *config.Config { return r.cfg }

// ErrEmbeddingsInput reports that the GPU runner does not take input
// embeddings (image features) yet.
var ErrEmbeddingsInput = errors.New("image input runs on the CPU backend only for now: use --backend cpu")

// ForwardEmbeddings is not supported on the GPU runner yet.
func (r *Runner) ForwardEmbeddings([]float32, int, []float32) error { return ErrEmbeddingsInput }
