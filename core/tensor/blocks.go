package tensor

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
)

// Block formats: ggml's quantized tensor types, kept as their raw blocks
// (Mat.Q) in llama.cpp's byte layout. A row of Cols elements is Cols/BlockLen
// consecutive blocks; Cols must be a multiple of the block length. Every
// dequantizer below reproduces ggml's reference dequantize_row_* bit for bit
// (each product is rounded to float32 in the order ggml writes it; nothing is
// fused).

// BlockLen is the number of elements of one block of a block dtype (1 for
// element types).
func (d DType) BlockLen() int {
	switch d {
	case Q8_0, Q4_0, MXFP4, Q4_1, Q5_0, Q5_1:
		return 32
	case Q4K, Q5K, Q6K:
		return 256
	}
	return 1
}

// BlockBytes is the size in bytes of one block of a block dtype (0 for
// element types).
func (d DType) BlockBytes() int {
	switch d {
	case Q8_0:
		return 2 + 32
	case Q4_0:
		return 2 + 16
	case MXFP4:
		return 1 + 16
	case Q4_1:
		return 2 + 2 + 16
	case Q5_0:
		return 2 + 4 + 16
	case Q5_1:
		return 2 + 2 + 4 + 16
	case Q4K:
		return 2 + 2 + 12 + 128
	case Q5K:
		return 2 + 2 + 12 + 32 + 128
	case Q6K:
		return 128 + 64 + 16 + 2
	}
	return 0
}

// Blocked reports whether d is a block format (its data is in Mat.Q).
func (d DType) Blocked() bool { return d.BlockBytes() != 0 }

// RowBytes is the storage of one row of cols elements of a block dtype.
func (d DType) RowBytes(cols int) int { return cols / d.BlockLen() * d.BlockBytes() }

// NewBlocked wraps raw ggml blocks (rows·RowBytes(cols) bytes, cols a
// multiple of the block length) as a matrix of block dtype dt. The bytes
// are not copied.
func NewBlocked(rows, cols int, dt DType, data []byte) (*Mat, error) {
	if !dt.Blocked() {
		return nil, fmt.Errorf("tensor: %v is not a block format", dt)
	}
	if cols%dt.BlockLen() != 0 {
		return nil, fmt.Errorf("tensor: %v rows of %d elements are not a whole number of %d-element blocks", dt, cols, dt.BlockLen())
	}
	if want := rows * dt.RowBytes(cols); len(data) != want {
		return nil, fmt.Errorf("tensor: %dx%d %v needs %d bytes, got %d", rows, cols, dt, want, len(data))
	}
	return &Mat{Rows: rows, Cols: cols, DType: dt, Q: data}, nil
}

// Dequantize expands the whole blocks of src into dst (len(dst) a multiple
// of dt's block length, src holding at least len(dst)/BlockLen blocks) with
// ggml's reference dequantizer of dt.
func Dequantize(dt DType, dst []float32, src []byte) {
	bl, bb := dt.BlockLen(), dt.BlockBytes()
	f := dequantizers[dt]
	for b := 0; b < len(dst)/bl; b++ {
		f(dst[b*bl:(b+1)*bl], src[b*bb:(b+1)*bb])
	}
}

var dequantizers = map[DType]func(y []float32, b []byte){
	Q8_0: dequantQ8_0, Q4_0: dequantQ4_0, MXFP4: dequantMXFP4,
	Q4K: dequantQ4K, Q5K: dequantQ5K, Q6K: dequantQ6K,
	Q4_1: dequantQ4_1, Q5_0: dequantQ5_0, Q5_1: dequantQ5_1,
}

func f16(b []byte) float32 { return half.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }

// dequantQ8_0 is block_q8_0 {fp16 d; int8 q[32]}: y[j] = q[j]·d.
func dequantQ8_0(y []float32, b []byte) {
	d := f16(b)
	for j := range 32 {
		y[j] = float32(int8(b[2+j])) * d
	}
}

// dequantQ4_0 is block_q4_0 {fp16 d; u8 qs[16]}: y[j] = ((qs[j]&15) − 8)·d,
// y[j+16] = ((qs[j]>>4) − 8)·d.
func dequantQ4_0(y []float32, b []byte) {
	d := f16(b)
	for j := range 16 {
		q := b[2+j]
		y[j] = float32(int(q&15)-8) * d
		y[j+16] = float32(int(q>>4)-8) * d
	}
}

// dequantQ4_1 is block_q4_1 {fp16 d, m; u8 qs[16]}: y[j] = (qs[j]&15)·d + m,
// y[j+16] = (qs[j]>>4)·d + m.
func dequantQ4_1(y []float32, b []byte) {
	d, m := f16(b), f16(b[2:])
	for j := range 16 {
		q := b[4+j]
		y[j] = float32(float32(q&15)*d) + m
		y[j+16] = float32(float32(q>>4)*d) + m
	}
}

// q5Bits returns the 5-bit values j and j+16 of a Q5_0/Q5_1 block: the
// nibbles of qs[j] with bits j and j+16 of the little-endian uint32 qh as
// their fifth bits.
func q5Bits(qh uint32, q byte, j int) (lo, hi int) {
	return int(q&15) | int(qh>>j&1)<<4, int(q>>4) | int(qh>>(j+16)&1)<<4
}

// dequantQ5_0 is block_q5_0 {fp16 d; u8 qh[4]; u8 qs[16]}: y = (q − 16)·d
// with 5-bit q (q5Bits).
func dequantQ5_0(y []float32, b []byte) {
	d := f16(b)
	qh := uint32(b[2]) | uint32(b[3])<<8 | uint32(b[4])<<16 | uint32(b[5])<<24
	for j := range 16 {
		lo, hi := q5Bits(qh, b[6+j], j)
		y[j] = float32(lo-16) * d
		y[j+16] = float32(hi-16) * d
	}
}

// dequantQ5_1 is block_q5_1 {fp16 d, m; u8 qh[4]; u8 qs[16]}: y = q·d + m
// with 5-bit q (q5Bits).
func dequantQ5_1(y []float32, b []byte) {
	d, m := f16(b), f16(b[2:])
	qh := uint32(b[4]) | uint32(b[5])<<8 | uint32(b[6])<<16 | uint32(b[7])<<24
	for j := range 16 {
		lo, hi := q5Bits(qh, b[8+j], j)
		y[j] = float32(float32(lo)*d) + m
		y[j+16] = float32(float32(hi)*d) + m
	}
}

// mxfp4Values are the E2M1 values doubled (ggml's kvalues_mxfp4).
var mxfp4Values = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// E8M0Half is 2^(e−128), an E8M0 scale halved (the values are doubled).
func E8M0Half(e uint8) float32 {
	if e < 2 {
		return math.Float32frombits(0x00200000 << e)
	}
	return math.Float32frombits(uint32(e-1) << 23)
}

// dequantMXFP4 is block_mxfp4 {u8 e; u8 qs[16]}: with d = 2^(e−128),
// y[j] = v[qs[j]&15]·d and y[j+16] = v[qs[j]>>4]·d, v the doubled E2M1
// values.
func dequantMXFP4(y []float32, b []byte) {
	d := E8M0Half(b[0])
	for j := range 16 {
		q := b[1+j]
		y[j] = float32(mxfp4Values[q&15]) * d
		y[j+16] = float32(mxfp4Values[q>>4]) * d
	}
}

// ScaleMinK4 unpacks the j-th 6-bit scale and min of a Q4_K/Q5_K block's
// 12 scale bytes (ggml's get_scale_min_k4).
func ScaleMinK4(j int, q []byte) (sc, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&15 | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// dequantQ4K is block_q4_K {fp16 d, dmin; u8 scales[12]; u8 qs[128]}: for
// each 64-element half-pair p (sub-blocks 2p, 2p+1 with 6-bit scale s and
// min m): y = (d·s)·q − dmin·m, q the low then the high nibbles of
// qs[32p : 32p+32].
func dequantQ4K(y []float32, b []byte) { dequantK(y, b, nil, b[16:144]) }

// dequantQ5K is block_q5_K {fp16 d, dmin; u8 scales[12]; u8 qh[32];
// u8 qs[128]}: as Q4_K with a fifth bit from qh (bit 2p for the low
// nibbles, 2p+1 for the high ones) adding 16 to q.
func dequantQ5K(y []float32, b []byte) { dequantK(y, b, b[16:48], b[48:176]) }

// dequantK expands a Q4_K (qh nil) or Q5_K super-block: d, dmin and the
// 12 scale bytes lead b; qs holds the nibbles, qh the fifth bits.
func dequantK(y []float32, b, qh, qs []byte) {
	d, dmin := f16(b), f16(b[2:])
	sc := b[4:16]
	for p := range 4 {
		s1, m1 := ScaleMinK4(2*p, sc)
		s2, m2 := ScaleMinK4(2*p+1, sc)
		d1, n1 := d*float32(s1), dmin*float32(m1)
		d2, n2 := d*float32(s2), dmin*float32(m2)
		q := qs[32*p : 32*p+32]
		o := y[64*p : 64*p+64]
		for l := range 32 {
			lo, hi := q[l]&15, q[l]>>4
			if qh != nil {
				lo += (qh[l] >> (2 * p) & 1) << 4
				hi += (qh[l] >> (2*p + 1) & 1) << 4
			}
			o[l] = float32(d1*float32(lo)) - n1
			o[l+32] = float32(d2*float32(hi)) - n2
		}
	}
}

// dequantQ6K is block_q6_K {u8 ql[128]; u8 qh[64]; int8 scales[16];
// fp16 d}: 6-bit q = (4 bits of ql | 2 bits of qh) − 32 and
// y = (d·scale)·q, scale the int8 of the element's 16-element group.
func dequantQ6K(y []float32, b []byte) {
	ql, qh, sc := b[0:128], b[128:192], b[192:208]
	d := f16(b[208:])
	for n := range 2 {
		l6, h6, s6, o := ql[64*n:], qh[32*n:], sc[8*n:], y[128*n:]
		for l := range 32 {
			is := l / 16
			q1 := int(l6[l]&15|(h6[l]&3)<<4) - 32
			q2 := int(l6[l+32]&15|(h6[l]>>2&3)<<4) - 32
			q3 := int(l6[l]>>4|(h6[l]>>4&3)<<4) - 32
			q4 := int(l6[l+32]>>4|(h6[l]>>6&3)<<4) - 32
			o[l] = float32(d*float32(int8(s6[is]))) * float32(q1)
			o[l+32] = float32(d*float32(int8(s6[is+2]))) * float32(q2)
			o[l+64] = float32(d*float32(int8(s6[is+4]))) * float32(q3)
			o[l+96] = float32(d*float32(int8(s6[is+6]))) * float32(q4)
		}
	}
}
