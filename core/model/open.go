package model

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// OpenDir loads a Hugging Face model directory (config.json and
// model.safetensors or a sharded index), memory-mapping the weights. Close
// the returned checkpoint when done with the model.
func OpenDir(dir string) (*Model, *safetensors.Checkpoint, error) {
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
