package model

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
)

// RandomTensors returns a random checkpoint for cfg, deterministic in seed,
// with names in cfg.Layout and weights scaled so activations stay O(1):
// linear weights N(0, 1/fan_in), embeddings N(0, 1), norm weights
// 1 + 0.1·N(0,1) (0.1·N(0,1) for Qwen3-Next's zero-centred ones), A_log = log U(1, 16), dt_bias and the router's selection
// bias 0.1·N(0,1), conv taps N(0, 1/K), AttnRes pseudo-queries
// N(0, 1/d). Each tensor draws from its own stream (seeded by the seed
// and its name), so adding a tensor does not change the others.
func RandomTensors(cfg *config.Config, seed uint64, dt safetensors.DType) []safetensors.WriteTensor {
	prefix := ""
	if cfg.Layout == config.LayoutKimiK3 {
		prefix = "language_model."
	}
	var out []safetensors.WriteTensor
	for _, s := range Spec(cfg) {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		r := rand.New(rand.NewPCG(seed, fnv(s.Name)))
		data := make([]float32, n)
		normal := func(std float64) {
			for i := range data {
				data[i] = float32(r.NormFloat64() * std)
			}
		}
		last := s.Shape[len(s.Shape)-1]
		name := s.Name
		tdt := dt
		switch {
		case cfg.Layout == config.LayoutQwen3Next && qwenZeroCentred(name): // scales by 1 + w
			normal(0.1)
		case strings.HasSuffix(name, "embed_tokens.weight"):
			normal(1)
		case strings.HasSuffix(name, "_res_proj.weight"):
			normal(1 / math.Sqrt(float64(last)))
		case strings.HasSuffix(name, "norm.weight"):
			normal(0.1)
			for i := range data {
				data[i]++
			}
		case strings.HasSuffix(name, "A_log"):
			for i := range data {
				data[i] = float32(math.Log(1 + 15*r.Float64()))
			}
			tdt = "F32"
		case strings.HasSuffix(name, "dt_bias"), strings.HasSuffix(name, "e_score_correction_bias"):
			normal(0.1)
			tdt = "F32"
		case strings.HasSuffix(name, "conv1d.weight"):
			normal(1 / math.Sqrt(float64(last)))
		default: // linear [out, in]
			normal(1 / math.Sqrt(float64(last)))
		}
		out = append(out, safetensors.WriteTensor{Name: prefix + name, DType: tdt, Shape: s.Shape, Data: data})
	}
	return out
}

// RandomCheckpoint is RandomTensors plus, when the config has a
// vision_config, the vision tower's random tensors (vision.RandomTensors).
func RandomCheckpoint(cfg *config.Config, seed uint64, dt safetensors.DType) ([]safetensors.WriteTensor, error) {
	out := RandomTensors(cfg, seed, dt)
	if cfg.Vision != nil {
		vc, err := vision.ParseConfig(cfg.Vision, cfg.HiddenSize)
		if err != nil {
			return nil, err
		}
		out = append(out, vision.RandomTensors(vc, seed, dt)...)
	}
	return out, nil
}

// WriteRandomDir writes RandomCheckpoint(cfg, seed, dt) as a model
// directory: config.json (in cfg.Layout) and model.safetensors.
func WriteRandomDir(dir string, cfg *config.Config, seed uint64, dt safetensors.DType) error {
	ts, err := RandomCheckpoint(cfg, seed, dt)
	if err != nil {
		return err
	}
	js, err := cfg.Marshal(cfg.Layout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		return err
	}
	meta := map[string]string{"format": "pt", "generator": fmt.Sprintf("tessera random seed=%d", seed)}
	return safetensors.WriteDir(dir, ts, meta, 0)
}

// fnv is FNV-1a of s, used to give each tensor its own random stream.
func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
