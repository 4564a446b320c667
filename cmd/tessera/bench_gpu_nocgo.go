//go:build !cgo

package main

import (
	"errors"
	"io"

	"github.com/tessera-llm/tessera/core/engine"
)

// benchGPU is unreachable without cgo (engine.Open never makes a GPU runner).
func benchGPU(*engine.Engine, benchGPUArgs, io.Writer, io.Writer) error {
	return errors.New("bench: this build has no GPU backend (built without cgo)")
}
