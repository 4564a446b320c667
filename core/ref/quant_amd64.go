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
func q6kRowAVX2(q *byte, x *float32, nblk int, s *float32) float32

// Nibble → value tables: Q4_0 (q − 8), Q4_K (q) and MXFP4 (doubled E2M1).
var (
	lutQ4_0  = [16]int8{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}
	lutIdent = [16]int8{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}
	lutMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}
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
	case tensor.Q4_0, tensor.MXFP4:
		s, z := buf[:nb], buf[nb:2*nb]
		clear(z)
		if dt == tensor.Q4_0 {
			for b := range s {
				s[b] = f16(q[18*b:])
			}
			return nibbleRowAVX2(&q[2], 18, &x[0], nb, 16, &lutQ4_0, &s[0], &s[0], &z[0], &z[0], nb, 0), true
		}
		for b := range s {
			s[b] = tensor.E8M0Half(q[17*b])
		}
		return nibbleRowAVX2(&q[1], 17, &x[0], nb, 16, &lutMXFP4, &s[0], &s[0], &z[0], &z[0], nb, 0), true
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
	case tensor.Q4K:
		// Four 64-element pairs per 144-byte super-block: nibbles 32 bytes
		// apart, then 16 bytes of the next block's scales.
		sLo, sHi, mLo, mHi := buf[:4*nb], buf[4*nb:8*nb], buf[8*nb:12*nb], buf[12*nb:16*nb]
		for sb := 0; sb < nb; sb++ {
			blk := q[144*sb : 144*sb+144]
			d, dmin := f16(blk), f16(blk[2:])
			for p := range 4 {
				s1, m1 := tensor.ScaleMinK4(2*p, blk[4:16])
				s2, m2 := tensor.ScaleMinK4(2*p+1, blk[4:16])
				i := 4*sb + p
				sLo[i], mLo[i] = d*float32(s1), dmin*float32(m1)
				sHi[i], mHi[i] = d*float32(s2), dmin*float32(m2)
			}
		}
		return nibbleRowAVX2(&q[16], 32, &x[0], 4*nb, 32, &lutIdent, &sLo[0], &sHi[0], &mLo[0], &mHi[0], 4, 16), true
	}
	return 0, false
}
