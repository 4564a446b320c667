//go:build cgo || (js && !cpuonly)

package wgsl

import "github.com/tessera-llm/tessera/core/config"

// Config is the configuration of the model the runner holds; with Forward,
// ForwardEmbeddings, State, MaxChunk and Reset it makes a Runner a
// generate.Backend.
func (r *Runner) Config() *config.Config { return r.cfg }
