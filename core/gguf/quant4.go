package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
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
