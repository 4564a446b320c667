package vision

import (
	"math"
	"math/rand/v2"
	"strings"

	"github.com/tessera-llm/tessera/core/safetensors"
)

// RandomTensors returns random vision weights for c, deterministic in seed,
// scaled so activations stay O(1): linear and patch weights N(0, 1/fan_in)
// (fan_in = last dim, 3·p·p for the patch embedding), norm weights
// 1 + 0.1·N(0,1), biases 0.02·N(0,1), the position table 0.1·N(0,1).
// Each tensor draws from its own stream (seed, FNV-1a of its name). Norm
// weights and biases are F32; matrices use dt.
func RandomTensors(c *Config, seed uint64, dt safetensors.DType) []safetensors.WriteTensor {
	var out []safetensors.WriteTensor
	for _, s := range Spec(c) {
		n := 1
		for _, d := range s.Shape {
			n *= d
		}
		r := rand.New(rand.NewPCG(seed, fnv(s.Name)))
		data := make([]float32, n)
		normal := func(std, mean float64) {
			for i := range data {
				data[i] = float32(mean + r.NormFloat64()*std)
			}
		}
		tdt := dt
		switch {
		case strings.Contains(s.Name, "norm") && strings.HasSuffix(s.Name, ".weight"):
			normal(0.1, 1)
			tdt = safetensors.F32
		case strings.HasSuffix(s.Name, ".bias"):
			normal(0.02, 0)
			tdt = safetensors.F32
		case strings.HasSuffix(s.Name, "pos_emb.weight"):
			normal(0.1, 0)
		case strings.HasSuffix(s.Name, "patch_embed.proj.weight"):
			normal(1/math.Sqrt(float64(n/s.Shape[0])), 0)
		default:
			normal(1/math.Sqrt(float64(s.Shape[len(s.Shape)-1])), 0)
		}
		out = append(out, safetensors.WriteTensor{Name: s.Name, DType: tdt, Shape: s.Shape, Data: data})
	}
	return out
}

// fnv is FNV-1a of s.
func fnv(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}
