//go:build !cgo

package main

import (
	"errors"
	"io"
)

// benchGPU is unreachable without cgo (newEngine never makes a GPU runner).
func benchGPU(*engine, benchGPUArgs, io.Writer, io.Writer) error {
	return errors.New("bench: this build has no GPU backend (built without cgo)")
}
