package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Float32 kernels for weights in ggml block formats (tensor.Q8_0, Q4_0,
// Q4K, Q5K, Q6K, MXFP4): activations stay float32, a row is dequantized
// exactly as ggml's reference dequantizer does (tensor.Dequantize) into
// float32 scratch and then multiplied with the float32 kernels, so a
// quantized matrix computes what its dequantized float32 copy computes.
// These kernels run where the integer path (actq8.go, on every CPU) is
// switched off (SetInt8Activations(false)), for the formats without one
// (Q4_1, Q5_1, Q5_K) and for matrices of fewer than 32 columns; Linear
// and LinearBatch take the integer path otherwise.

// blockRowDot is W[o,:]·x for a block-format W: Σ_i deq(W)[o,i]·x[i],
// with the SIMD kernel of W's format where there is one (fastBlockDot),
// else the row dequantized into buf (len ≥ W.Cols) first.
func blockRowDot(W *tensor.Mat, o int, x, buf []float32) float32 {
	if s, ok := fastBlockDot(W, o, x, buf); ok {
		return s
	}
	rb := W.DType.RowBytes(W.Cols)
	row := buf[:W.Cols]
	tensor.Dequantize(W.DType, row, W.Q[o*rb:(o+1)*rb])
	return dot(row, x[:W.Cols])
}
