package model

import (
	"fmt"
	"os"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// ggufOpen opens a GGUF file; package gguf registers it (RegisterGGUF),
// which imports this package and so cannot be imported from here.
var ggufOpen func(path string) (*Model, *safetensors.Checkpoint, error)

// RegisterGGUF sets the opener OpenDir uses for a .gguf file.
func RegisterGGUF(open func(path string) (*Model, *safetensors.Checkpoint, error)) { ggufOpen = open }

// IsGGUF reports whether path names a GGUF model file rather than a model
// directory: a regular file whose name ends in ".gguf".
func IsGGUF(path string) bool {
	if !strings.HasSuffix(strings.ToLower(path), ".gguf") {
		return false
	}
	st, err := os.Stat(path)
	return err == nil && st.Mode().IsRegular()
}

// OpenDir loads a Hugging Face model directory (config.json and
// model.safetensors or a sharded index), memory-mapping the weights, or a
// GGUF file in llama.cpp's kimi-k3 / kimi-linear layout (see IsGGUF; the
// program must link package gguf). Close the returned checkpoint when done
// with the model.
func OpenDir(dir string) (*Model, *safetensors.Checkpoint, error) {
	if IsGGUF(dir) {
		if ggufOpen == nil {
			return nil, nil, fmt.Errorf("%s: GGUF input is not linked into this program (import core/gguf)", dir)
		}
		return ggufOpen(dir)
	}
	cfg, err := config.Load(dir)
	if err != nil {
		return nil, nil, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	m, err := Load(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, nil, fmt.Errorf("%s: %w", dir, err)
	}
	return m, ck, nil
}
