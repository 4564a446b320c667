package model

import (
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// QuantizableQ8 reports whether a checkpoint tensor becomes int8 under
// config.Q8Config: the 2-D weights of linear layers, except the LM head,
// the embeddings, the MoE routers, AttnRes pseudo-queries and the vision
// tower and projector (they stay as they are).
func QuantizableQ8(name string, shape []int) bool {
	if len(shape) != 2 || shape[0] < 2 || !strings.HasSuffix(name, ".weight") {
		return false
	}
	for _, skip := range []string{"lm_head.", "embed_tokens.", "block_sparse_moe.gate.", "_res_proj.", "vision_tower.", "mm_projector."} {
		if strings.Contains(name, skip) {
			return false
		}
	}
	return true
}

// QuantizeQ8 converts the quantizable tensors of a checkpoint to int8 with
// one float32 scale per row (NAME.weight I8 + NAME.weight_scale [rows, 1],
// compressed-tensors' int-quantized channel format, tensor.Quantize's
// rounding) and marks cfg as quantized (cfg.Quant, cfg.QuantConfig). Other
// tensors are returned unchanged.
func QuantizeQ8(cfg *config.Config, ts []safetensors.WriteTensor) []safetensors.WriteTensor {
	out := make([]safetensors.WriteTensor, 0, len(ts)+len(ts)/2)
	for _, t := range ts {
		if !QuantizableQ8(t.Name, t.Shape) {
			out = append(out, t)
			continue
		}
		q := tensor.Quantize(tensor.NewF32(t.Shape[0], t.Shape[1], t.Data))
		vals := make([]float32, len(q.I8))
		for i, v := range q.I8 {
			vals[i] = float32(v)
		}
		out = append(out,
			safetensors.WriteTensor{Name: t.Name, DType: safetensors.I8, Shape: t.Shape, Data: vals},
			safetensors.WriteTensor{Name: t.Name + "_scale", DType: safetensors.F32, Shape: []int{t.Shape[0], 1}, Data: q.Scale})
	}
	cfg.Quant, cfg.QuantConfig = "q8", config.Q8Config()
	return out
}
