package main

import (
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
)

// samplingFlags are the sampling options shared by run and chat.
type samplingFlags struct {
	temp, topP, minP, rep *float64
	topK                  *int
	seed                  *uint64
	bias                  *string
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
		bias: fs.String("logit-bias", "", "add BIAS to token ID's logit before sampling: ID:BIAS[,ID:BIAS...], BIAS in [-100, 100]; -100 bans the token"),
	}
}

// options returns the validated sampler options.
func (f *samplingFlags) options() (generate.SamplerOptions, error) {
	so := generate.SamplerOptions{Temperature: float32(*f.temp), TopK: *f.topK, TopP: float32(*f.topP),
		MinP: float32(*f.minP), RepetitionPenalty: float32(*f.rep), Seed: *f.seed}
	var err error
	if so.LogitBias, err = parseLogitBias(*f.bias); err != nil {
		return so, err
	}
	return so, so.Validate()
}

// parseLogitBias reads --logit-bias: comma-separated ID:BIAS pairs.
func parseLogitBias(s string) ([]generate.TokenBias, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []generate.TokenBias
	for _, pair := range strings.Split(s, ",") {
		id, bias, ok := strings.Cut(strings.TrimSpace(pair), ":")
		n, err1 := strconv.Atoi(id)
		b, err2 := strconv.ParseFloat(bias, 32)
		if !ok || err1 != nil || err2 != nil {
			return nil, fmt.Errorf("--logit-bias: %q is not ID:BIAS (e.g. 135:-100)", pair)
		}
		out = append(out, generate.TokenBias{ID: n, Bias: float32(b)})
	}
	return out, nil
}

// gpuMemoryHelp is the --gpu-memory flag's help (run, chat, bench).
const gpuMemoryHelp = "GPU memory budget: bytes (512MiB, 6G) or a share of the routed experts (50%); a model over it streams its experts (default " + engine.GPUMemEnv + ")"

// exactHelp is the --exact flag's help (every command that runs a model).
const exactHelp = "CPU: multiply quantized weights in float32 as the GPU does instead of rounding activations to int8 (slower; the same greedy tokens as the GPU and the browser; default " + engine.ExactEnv + "=1)"

// nCPUMoEHelp is the --n-cpu-moe flag's help (run, chat, bench).
const nCPUMoEHelp = "GPU backends: compute the routed experts of the first N MoE layers on the CPU (as llama.cpp's --n-cpu-moe)"

// openEngine opens a model directory for generation (memory checked, the
// backend chosen as o says; the choice is reported on stderr).
func openEngine(dir string, o engine.OpenOptions, stderr io.Writer) (*engine.Engine, error) {
	o.Log = stderr
	return engine.Open(dir, o)
}
