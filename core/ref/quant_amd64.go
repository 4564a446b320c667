//go:build amd64 && !purego

package ref

import (
	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// nibbleRowAVX2 and int8RowAVX2 are in quant_amd64.s.
//
//go:noescape
func nibbleRowAVX2(q *byte, stride int, x *float32, nblk, half int, lut *[16]int8, sLo, sHi, mLo, mHi *float32, group, gap int) float32

//go:noescape
func int8RowAVX2(q *byte, stride int, x *float32, nblk int, s *float32) float32

//go:noescape
func nibbleDequantAVX2(q *byte, stride int, dst *float32, nblk, half int, lut *[16]int8, sLo, sHi, mLo, mHi *float32, group, gap int)

//go:noescape
func q6kRowAVX2(q *byte, x *float32, nblk int, s *float32) float32

// Nibble → value tables: Q4_0 (q − 8) and Q4_K (q); MXFP4's is lutMXFP4.
var (
	lutQ4_0  = [16]int8{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}
	lutIdent = [16]int8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
)

// fastBlockDot is W[o,:]·x = Σ_b d_b·Σ_j q_bj·x_bj (− Σ_sub dmin·m·Σx for
// Q4_K) for Q8_0, Q4_0, Q4_K, Q6_K and MXFP4 rows with the AVX2 kernels: the
// block scales are decoded into buf (≥ Cols/16 floats) and the packed
// values widened in registers, never written out. ok is false for other
// dtypes or without AVX2.
func fastBlockDot(W *tensor.Mat, o int, x, buf []float32) (float32, bool) {
	if !useAVX2 {
		return 0, false
	}
	dt := W.DType
	rb := dt.RowBytes(W.Cols)
	q := W.Q[o*rb : (o+1)*rb]
	nb := W.Cols / dt.BlockLen()
	x = x[:W.Cols]
	f16 := func(b []byte) float32 { return half.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
	switch dt {
	case tensor.Q8_0:
		s := buf[:nb]
		for b := range s {
			s[b] = f16(q[34*b:])
		}
		return int8RowAVX2(&q[2], 34, &x[0], nb, &s[0]), true
	case tensor.Q4_0, tensor.MXFP4, tensor.Q4K:
		l, _ := nibbleRow(dt, q, W.Cols, buf)
		return nibbleRowAVX2(l.q, l.stride, &x[0], l.nblk, l.half, l.lut, &l.sLo[0], &l.sHi[0], &l.mLo[0], &l.mHi[0], l.group, l.gap), true
	case tensor.Q6K:
		s := buf[:16*nb]
		for b := 0; b < nb; b++ {
			blk := q[210*b : 210*b+210]
			d := f16(blk[208:])
			for g := range 16 {
				s[16*b+g] = d * float32(int8(blk[192+g]))
			}
		}
		return q6kRowAVX2(&q[0], &x[0], nb, &s[0]), true
	}
	return 0, false
}

// nibbleLayout describes a row of a nibble format for the AVX2 kernels:
// the first block's nibbles, their spacing, the lookup table and the
// per-block (per 64-element pair for Q4_K) scales and mins, decoded into
// sc (≥ Cols/16 floats).
type nibbleLayout struct {
	q                  *byte
	stride, nblk, half int
	lut                *[16]int8
	sLo, sHi, mLo, mHi []float32
	group, gap         int
}

// nibbleRow decodes the scales of row q (rb bytes of dtype dt, cols
// values) into sc; ok is false for formats without a nibble kernel.
func nibbleRow(dt tensor.DType, q []byte, cols int, sc []float32) (l nibbleLayout, ok bool) {
	f16 := func(b []byte) float32 { return half.F16ToF32(uint16(b[0]) | uint16(b[1])<<8) }
	nb := cols / dt.BlockLen()
	switch dt {
	case tensor.Q4_0, tensor.MXFP4:
		s, z := sc[:nb], sc[nb:2*nb]
		clear(z)
		l = nibbleLayout{q: &q[2], stride: 18, nblk: nb, half: 16, lut: &lutQ4_0, sLo: s, sHi: s, mLo: z, mHi: z, group: nb}
		if dt == tensor.Q4_0 {
			for b := range s {
				s[b] = f16(q[18*b:])
			}
			return l, true
		}
		for b := range s {
			s[b] = tensor.E8M0Half(q[17*b])
		}
		l.q, l.stride, l.lut = &q[1], 17, &lutMXFP4
		return l, true
	case tensor.Q4K:
		// Four 64-element pairs per 144-byte super-block: nibbles 32 bytes
		// apart, then 16 bytes of the next block's scales.
		l = nibbleLayout{q: &q[16], stride: 32, nblk: 4 * nb, half: 32, lut: &lutIdent,
			sLo: sc[:4*nb], sHi: sc[4*nb : 8*nb], mLo: sc[8*nb : 12*nb], mHi: sc[12*nb : 16*nb], group: 4, gap: 16}
		for sb := 0; sb < nb; sb++ {
			blk := q[144*sb : 144*sb+144]
			d, dmin := f16(blk), f16(blk[2:])
			for p := range 4 {
				s1, m1 := tensor.ScaleMinK4(2*p, blk[4:16])
				s2, m2 := tensor.ScaleMinK4(2*p+1, blk[4:16])
				i := 4*sb + p
				l.sLo[i], l.mLo[i] = d*float32(s1), dmin*float32(m1)
				l.sHi[i], l.mHi[i] = d*float32(s2), dmin*float32(m2)
			}
		}
		return l, true
	}
	return l, false
}

// fastDequantRows writes rows [o0, o0+n) of W as float32 into dst with
// the AVX2 nibble kernel, bit for bit as tensor.Dequantize (Q4_0, Q4_K,
// MXFP4); sc is scale scratch (≥ Cols/16 floats). ok is false otherwise.
func fastDequantRows(W *tensor.Mat, o0, n int, dst, sc []float32) bool {
	if !useAVX2 {
		return false
	}
	rb := W.DType.RowBytes(W.Cols)
	for r := 0; r < n; r++ {
		q := W.Q[(o0+r)*rb : (o0+r+1)*rb]
		l, ok := nibbleRow(W.DType, q, W.Cols, sc)
		if !ok {
			return false
		}
		out := dst[r*W.Cols : (r+1)*W.Cols]
		nibbleDequantAVX2(l.q, l.stride, &out[0], l.nblk, l.half, l.lut, &l.sLo[0], &l.sHi[0], &l.mLo[0], &l.mHi[0], l.group, l.gap)
	}
	return true
}

// hasAVX2 reports whether the AVX2 block kernels run on this CPU.
func hasAVX2() bool { return useAVX2 }
