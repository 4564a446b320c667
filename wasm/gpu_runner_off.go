//go:build js && wasm && !webgpu

package main

import (
	"errors"

	"github.com/tessera-llm/tessera/wasm/engine"
)

// useGPU is unavailable in the default bundle: the WebGPU runner is built
// only with -tags webgpu (it adds ~0.2 MB gzip and does not pass
// Chromium's validation yet; see gpu_runner.go).
func useGPU(*engine.Engine) (gpuInfo, error) {
	return probeGPU(), errors.New("this tessera.wasm was built without the WebGPU runner (rebuild with -tags webgpu); use backend 'cpu'")
}
