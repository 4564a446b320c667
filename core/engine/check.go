package engine

import (
	"errors"
	"fmt"
	"io/fs"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// Check reads a model's config.json and safetensors headers through open
// and makes every check loading it would make that they can answer
// (model.CheckHeader), reading no tensor data: the browser asks it before
// downloading the weights. It returns the configuration and what the
// model needs.
func Check(open safetensors.Opener) (*config.Config, model.Needs, error) {
	raw, err := readFile(open, ConfigFile, 16<<20)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, model.Needs{}, fmt.Errorf("model has no %s (is the model URL right?): %w", ConfigFile, err)
		}
		return nil, model.Needs{}, err
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		return nil, model.Needs{}, fmt.Errorf("%s: %w", ConfigFile, err)
	}
	ck, err := safetensors.Open(open)
	if err != nil {
		return nil, model.Needs{}, err
	}
	defer ck.Close()
	n, err := model.CheckHeader(cfg, ck)
	return cfg, n, err
}

// CheckGGUF is Check for a GGUF file held in src: its header, metadata
// and tensor index, as LoadGGUF reads them.
func CheckGGUF(src safetensors.Source) (*config.Config, model.Needs, error) {
	f, err := gguf.Parse(src, src.Size(), gguf.Limits{})
	if err != nil {
		return nil, model.Needs{}, err
	}
	cfg, ck, err := gguf.ImportCheckpoint(f)
	if err != nil {
		f.Close()
		return nil, model.Needs{}, err
	}
	defer ck.Close()
	n, err := model.CheckHeader(cfg, ck)
	return cfg, n, err
}
