//go:build js && wasm && cpuonly

package main

import (
	"errors"

	"github.com/tessera-llm/tessera/core/engine"
)

// errNoGPURunner: this bundle was built with -tags cpuonly, without the
// WebGPU runner.
var errNoGPURunner = errors.New("this tessera.wasm was built without the WebGPU runner (-tags cpuonly); running on the CPU")

func useGPU(*engine.Engine, bool, engine.GPUMemory) (gpuInfo, error) {
	return probeGPU(), errNoGPURunner
}

func loseGPUForTest(bool) any { return false }

// haveGPURunner: this bundle has no WebGPU runner.
const haveGPURunner = false
