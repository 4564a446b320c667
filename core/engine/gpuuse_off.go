//go:build !cgo && (!js || cpuonly)

package engine

import (
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// GPUMemoryOf is nil in builds without a GPU backend.
func GPUMemoryOf(*wgsl.Runner, *model.Model) *GPUMemoryUse { return nil }
