package model

import (
	"fmt"
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

// QuantizeMXFP4 converts the routed experts' matrices of a checkpoint
// (config.MXFP4ExpertPattern, the part Kimi K3 ships as MXFP4) to
// compressed-tensors MXFP4: NAME.weight_packed U8 [rows, cols/2] and
// NAME.weight_scale U8 [rows, cols/32], with ggml's reference rounding
// (tensor.QuantizeMXFP4), so the experts hold the bytes a GGUF MXFP4 export
// of the same weights holds. cfg's quantization_config becomes
// config.MXFP4Config(); other tensors are returned unchanged.
func QuantizeMXFP4(cfg *config.Config, ts []safetensors.WriteTensor) ([]safetensors.WriteTensor, error) {
	if err := cfg.SetQuant(config.MXFP4Config()); err != nil {
		return nil, err
	}
	out := make([]safetensors.WriteTensor, 0, len(ts)+len(ts)/2)
	for _, t := range ts {
		module, ok := strings.CutSuffix(t.Name, ".weight")
		if !ok || !cfg.QuantTargets(module) {
			out = append(out, t)
			continue
		}
		if len(t.Shape) != 2 || t.Shape[1]%32 != 0 {
			return nil, fmt.Errorf("tensor %s: shape %v: MXFP4 needs a matrix whose columns are a multiple of 32", t.Name, t.Shape)
		}
		rows, cols := t.Shape[0], t.Shape[1]
		blocks, err := tensor.QuantizeMXFP4(t.Data)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		packed, scale, err := tensor.MXFP4ToPacked(blocks, rows, cols)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", t.Name, err)
		}
		out = append(out,
			safetensors.WriteTensor{Name: t.Name + "_packed", DType: safetensors.U8, Shape: []int{rows, cols / 2}, Data: bytesAsValues(packed)},
			safetensors.WriteTensor{Name: t.Name + "_scale", DType: safetensors.U8, Shape: []int{rows, cols / 32}, Data: bytesAsValues(scale)})
	}
	return out, nil
}

// bytesAsValues is b as the float32 values safetensors.WriteTensor takes.
func bytesAsValues(b []byte) []float32 {
	v := make([]float32, len(b))
	for i, x := range b {
		v[i] = float32(x)
	}
	return v
}
