//go:build !cgo

package main

import (
	"errors"
	"io"

	"github.com/tessera-llm/tessera/core/engine"
)

var errNoGPUBench = errors.New("bench: this build has no GPU backend (built without cgo)")

// benchGPU is unreachable without cgo (engine.Open never makes a GPU runner).
func benchGPU(*engine.Engine, benchGPUArgs, io.Writer, io.Writer) (benchResult, error) {
	return benchResult{}, errNoGPUBench
}

// benchMemorySweep needs the GPU backend.
func benchMemorySweep([]string, engine.OpenOptions, benchGPUArgs, string, io.Writer, io.Writer) error {
	return errNoGPUBench
}
