package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// QuantizeQ4_0 quantizes x (length a multiple of 32) to Q4_0 as ggml's
// reference quantize_row_q4_0_ref does: per block, m is the value of
// largest magnitude (the first one on ties), d = m/−8, id = 1/d (0 when d
// is 0), q = min(15, trunc(x·id + 8.5)), two per byte (element j low,
// j+16 high), and d is stored rounded to fp16.
func QuantizeQ4_0(x []float32) ([]byte, error) {
	const bl, bb = 32, 18
	if len(x)%bl != 0 {
		return nil, fmt.Errorf("Q4_0 needs a multiple of %d values, got %d", bl, len(x))
	}
	out := make([]byte, len(x)/bl*bb)
	for b := 0; b < len(x)/bl; b++ {
		blk := x[b*bl : (b+1)*bl]
		var amax, m float32
		for _, v := range blk {
			if a := float32(math.Abs(float64(v))); amax < a {
				amax, m = a, v
			}
		}
		d := m / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		o := out[b*bb:]
		binary.LittleEndian.PutUint16(o, half.F32ToF16(d))
		for j := 0; j < 16; j++ {
			x0 := float32(blk[j]*id) + 8.5
			x1 := float32(blk[j+16]*id) + 8.5
			o[2+j] = byte(min(15, int8(x0))) | byte(min(15, int8(x1)))<<4
		}
	}
	return out, nil
}

// QuantizeMXFP4 quantizes x (length a multiple of 32) to MXFP4 as ggml's
// reference quantize_row_mxfp4_ref does: per block, amax = max |x|,
// e = floor(log2 amax) − 2 + 127 (0 when amax is 0; log2 rounded to
// float32 first, as log2f), d = 2^(e−128), and each value takes the
// doubled-E2M1 code v minimising |v·d − x| (the first on ties).
func QuantizeMXFP4(x []float32) ([]byte, error) {
	const bl, bb = 32, 17
	if len(x)%bl != 0 {
		return nil, fmt.Errorf("MXFP4 needs a multiple of %d values, got %d", bl, len(x))
	}
	out := make([]byte, len(x)/bl*bb)
	best := func(v, d float32) byte {
		bi, be := 0, float32(math.Abs(float64(float32(mxfp4Codes[0])*d-v)))
		for i := 1; i < 16; i++ {
			if e := float32(math.Abs(float64(float32(mxfp4Codes[i])*d - v))); e < be {
				bi, be = i, e
			}
		}
		return byte(bi)
	}
	for b := 0; b < len(x)/bl; b++ {
		blk := x[b*bl : (b+1)*bl]
		var amax float32
		for _, v := range blk {
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		var e uint8
		if amax > 0 {
			l := float32(math.Log2(float64(amax)))
			e = uint8(int(math.Floor(float64(l))) - 2 + 127)
		}
		d := tensor.E8M0Half(e)
		o := out[b*bb:]
		o[0] = e
		for j := 0; j < 16; j++ {
			o[1+j] = best(blk[j], d) | best(blk[j+16], d)<<4
		}
	}
	return out, nil
}

// mxfp4Codes are the doubled E2M1 values of the 16 MXFP4 codes.
var mxfp4Codes = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
