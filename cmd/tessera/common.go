package main

import (
	"flag"
	"fmt"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// samplingFlags are the sampling options shared by run and chat.
type samplingFlags struct {
	temp, topP, minP, rep *float64
	topK                  *int
	seed                  *uint64
}

// addSamplingFlags registers the sampling flags with the given default
// temperature and top-p.
func addSamplingFlags(fs *flag.FlagSet, temp, topP float64) *samplingFlags {
	return &samplingFlags{
		temp: fs.Float64("temperature", temp, "sampling temperature (0: greedy)"),
		topK: fs.Int("top-k", 0, "keep the K most likely tokens (0: all)"),
		topP: fs.Float64("top-p", topP, "nucleus sampling mass"),
		minP: fs.Float64("min-p", 0, "drop tokens below min-p × the top probability"),
		rep:  fs.Float64("repetition-penalty", 1, "penalty for tokens already seen (1: off)"),
		seed: fs.Uint64("seed", 1, "random seed"),
	}
}

// options returns the validated sampler options.
func (f *samplingFlags) options() (generate.SamplerOptions, error) {
	so := generate.SamplerOptions{Temperature: float32(*f.temp), TopK: *f.topK, TopP: float32(*f.topP),
		MinP: float32(*f.minP), RepetitionPenalty: float32(*f.rep), Seed: *f.seed}
	return so, so.Validate()
}

// loadedModel is a model directory opened for generation.
type loadedModel struct {
	m     *model.Model
	ck    *safetensors.Checkpoint
	codec tokenizer.Codec
}

// openModel loads the weights (memory-mapped) and the text codec of dir.
func openModel(dir string) (*loadedModel, error) {
	m, ck, err := model.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	if err := checkMemory(m, ck); err != nil {
		ck.Close()
		return nil, err
	}
	codec, err := loadCodec(dir, m.Cfg.VocabSize)
	if err != nil {
		ck.Close()
		return nil, err
	}
	return &loadedModel{m: m, ck: ck, codec: codec}, nil
}

func (l *loadedModel) Close() error { return l.ck.Close() }

// loadChat is the chat renderer of a model directory or GGUF file: its
// chat template, else the built-in Kimi format.
func loadChat(path string) (*chat.Renderer, error) {
	if !model.IsGGUF(path) {
		return chat.ForModel(path)
	}
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	r, err := chat.FromGGUF(f.Get)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return r, nil
}

// loadCodec is the text codec of a model directory, or of a GGUF file's
// vocabulary.
func loadCodec(path string, vocab int) (tokenizer.Codec, error) {
	if model.IsGGUF(path) {
		return gguf.LoadCodec(path, vocab)
	}
	return tokenizer.LoadCodec(path, vocab)
}
