package tensor

import (
	"fmt"
	"math"
)

// MXFP4 in two byte layouts: ggml's block_mxfp4 (Mat.Q of an MXFP4 Mat,
// what GGUF files hold) and compressed-tensors' mxfp4-pack-quantized (what
// Kimi K3's safetensors checkpoints hold: NAME.weight_packed, uint8
// [rows, cols/2], two E2M1 codes per byte with the even column in the low
// nibble, and NAME.weight_scale, uint8 [rows, cols/32], one E8M0 exponent
// per 32 consecutive columns). Both carry the same 4-bit codes and scale
// bytes, so converting between them only moves nibbles: a matrix read from
// either layout dequantizes to the same values bit for bit.

// QuantizeMXFP4 quantizes x (length a multiple of 32) to MXFP4 blocks as
// ggml's reference quantize_row_mxfp4_ref does: per block, amax = max |x|,
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
		bi, be := 0, float32(math.Abs(float64(float32(mxfp4Values[0])*d-v)))
		for i := 1; i < 16; i++ {
			if e := float32(math.Abs(float64(float32(mxfp4Values[i])*d - v))); e < be {
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
		d := E8M0Half(e)
		o := out[b*bb:]
		o[0] = e
		for j := 0; j < 16; j++ {
			o[1+j] = best(blk[j], d) | best(blk[j+16], d)<<4
		}
	}
	return out, nil
}

// MXFP4FromPacked returns the MXFP4 blocks (ggml's layout) of a rows×cols
// matrix given in compressed-tensors' layout: packed (rows·cols/2 bytes,
// column 2k in the low nibble of byte k of its row, column 2k+1 in the
// high one) and scale (rows·cols/32 E8M0 exponents). cols must be a
// multiple of 32.
func MXFP4FromPacked(packed, scale []byte, rows, cols int) ([]byte, error) {
	if err := checkPacked(len(packed), len(scale), rows, cols); err != nil {
		return nil, err
	}
	nb := rows * cols / 32
	out := make([]byte, nb*17)
	for b := range nb {
		src, dst := packed[16*b:16*b+16], out[17*b:17*b+17]
		dst[0] = scale[b]
		// Codes c[2k] = src[k]&15, c[2k+1] = src[k]>>4; ggml's byte j
		// holds c[j] low and c[j+16] high.
		for j := 0; j < 8; j++ {
			lo, hi := src[j], src[8+j]
			dst[1+2*j] = lo&15 | hi<<4&0xf0
			dst[2+2*j] = lo>>4 | hi&0xf0
		}
	}
	return out, nil
}

// MXFP4ToPacked is the inverse of MXFP4FromPacked: the compressed-tensors
// packed codes and scales of rows×cols MXFP4 blocks.
func MXFP4ToPacked(blocks []byte, rows, cols int) (packed, scale []byte, err error) {
	if cols%32 != 0 || rows < 0 || len(blocks) != rows*cols/32*17 {
		return nil, nil, fmt.Errorf("MXFP4: %d bytes for %d×%d values, want %d (columns a multiple of 32)", len(blocks), rows, cols, rows*cols/32*17)
	}
	nb := rows * cols / 32
	packed, scale = make([]byte, nb*16), make([]byte, nb)
	for b := range nb {
		src, dst := blocks[17*b:17*b+17], packed[16*b:16*b+16]
		scale[b] = src[0]
		for j := 0; j < 8; j++ {
			a, c := src[1+2*j], src[2+2*j] // codes 2j, 2j+16 and 2j+1, 2j+17
			dst[j] = a&15 | c<<4
			dst[8+j] = a>>4 | c&0xf0
		}
	}
	return packed, scale, nil
}

// checkPacked validates the sizes of a compressed-tensors MXFP4 matrix.
func checkPacked(np, ns, rows, cols int) error {
	switch {
	case rows < 0 || cols <= 0 || cols%32 != 0:
		return fmt.Errorf("MXFP4: %d×%d: columns must be a positive multiple of 32", rows, cols)
	case np != rows*cols/2:
		return fmt.Errorf("MXFP4: %d packed bytes for %d×%d values, want %d", np, rows, cols, rows*cols/2)
	case ns != rows*cols/32:
		return fmt.Errorf("MXFP4: %d scales for %d×%d values, want %d (one per 32)", ns, rows, cols, rows*cols/32)
	}
	return nil
}
