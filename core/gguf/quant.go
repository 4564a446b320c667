package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Q8_0 stores blocks of 32 values as one fp16 scale d followed by 32 int8
// quants q, with x ≈ d·q (ggml block_q8_0).
const (
	q80Block = 32
	q80Bytes = 2 + q80Block
)

// QuantizeQ8_0 quantizes x (length a multiple of 32) to Q8_0 as ggml's
// reference quantize_row_q8_0_ref does: per block, amax = max |x|,
// d = amax/127 in float32, id = 1/d (0 when d is 0), q = roundf(x·id)
// (halves away from zero), and d is stored rounded to fp16.
func QuantizeQ8_0(x []float32) ([]byte, error) {
	if len(x)%q80Block != 0 {
		return nil, fmt.Errorf("Q8_0 needs a multiple of %d values, got %d", q80Block, len(x))
	}
	out := make([]byte, len(x)/q80Block*q80Bytes)
	for b := 0; b < len(x)/q80Block; b++ {
		blk := x[b*q80Block : (b+1)*q80Block]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		o := out[b*q80Bytes:]
		binary.LittleEndian.PutUint16(o, half.F32ToF16(d))
		for j, v := range blk {
			p := float32(v * id) // rounded to float32 as in C, never fused
			o[2+j] = byte(int8(math.Round(float64(p))))
		}
	}
	return out, nil
}

// DequantizeQ8_0 expands Q8_0 blocks in src into dst (len(dst)/32 blocks).
func DequantizeQ8_0(dst []float32, src []byte) {
	for b := 0; b < len(dst)/q80Block; b++ {
		o := src[b*q80Bytes:]
		d := half.F16ToF32(binary.LittleEndian.Uint16(o))
		for j := 0; j < q80Block; j++ {
			dst[b*q80Block+j] = d * float32(int8(o[2+j]))
		}
	}
}

// Encode converts float32 values to the bytes of a tensor of type t: F32,
// F16 and BF16 (rounded to nearest even), Q8_0, Q4_0, MXFP4 or Q4_K
// (ggml's reference quantizers: QuantizeQ8_0, QuantizeQ4_0, tensor.QuantizeMXFP4,
// QuantizeQ4K).
func Encode(t GGMLType, x []float32) ([]byte, error) {
	switch t {
	case TypeF32:
		out := make([]byte, 4*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint32(out[4*i:], math.Float32bits(v))
		}
		return out, nil
	case TypeF16, TypeBF16:
		conv := half.F32ToF16
		if t == TypeBF16 {
			conv = half.F32ToBF16
		}
		out := make([]byte, 2*len(x))
		for i, v := range x {
			binary.LittleEndian.PutUint16(out[2*i:], conv(v))
		}
		return out, nil
	case TypeQ8_0:
		return QuantizeQ8_0(x)
	case TypeQ4_0:
		return QuantizeQ4_0(x)
	case TypeMXFP4:
		return tensor.QuantizeMXFP4(x)
	case TypeQ4_K:
		return QuantizeQ4K(x)
	}
	return nil, fmt.Errorf("encoding float32 as %s is not implemented", t)
}
