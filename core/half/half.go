// Package half converts between float32 and the 16-bit floating-point
// formats used by model checkpoints: IEEE 754 binary16 (fp16) and bfloat16.
//
// All conversions from float32 round to nearest, ties to even. fp16 values
// are decoded through a 65536-entry lookup table built once at package
// initialisation.
package half

import "math"

// f16Table maps every fp16 bit pattern to its float32 value. It is built
// once at package initialisation (256 KiB, well under a millisecond).
var f16Table = buildF16Table()

func buildF16Table() *[1 << 16]float32 {
	t := new([1 << 16]float32)
	for i := range t {
		t[i] = f16ToF32Slow(uint16(i))
	}
	return t
}

// f16ToF32Slow decodes an fp16 bit pattern by bit manipulation. It is exact:
// every fp16 value (including subnormals) is representable in float32.
// NaN payloads are preserved in the high mantissa bits.
func f16ToF32Slow(h uint16) float32 {
	sign := uint32(h>>15) << 31
	exp := uint32(h>>10) & 0x1f
	mant := uint32(h) & 0x3ff
	switch {
	case exp == 0x1f: // inf or NaN
		return math.Float32frombits(sign | 0x7f800000 | mant<<13)
	case exp != 0: // normal
		return math.Float32frombits(sign | (exp+112)<<23 | mant<<13)
	case mant == 0: // ±0
		return math.Float32frombits(sign)
	default: // subnormal: normalise the mantissa
		e := uint32(113) // exponent of 2^-14 in float32 bias is 127-14 = 113
		for mant&0x400 == 0 {
			mant <<= 1
			e--
		}
		return math.Float32frombits(sign | e<<23 | (mant&0x3ff)<<13)
	}
}

// F16ToF32 converts an IEEE 754 binary16 bit pattern to float32. The
// conversion is exact and uses a lookup table built once.
func F16ToF32(h uint16) float32 {
	return f16Table[h]
}

// F32ToF16 converts f to the nearest IEEE 754 binary16 bit pattern, rounding
// to nearest with ties to even. Values too large for fp16 become ±Inf,
// values too small become (signed) subnormals or ±0, and NaN stays NaN
// (quiet, with the top payload bits kept).
func F32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	sign := uint16(b>>16) & 0x8000
	exp := int32(b>>23) & 0xff
	mant := b & 0x7fffff

	if exp == 0xff {
		if mant == 0 {
			return sign | 0x7c00 // ±Inf
		}
		// NaN: keep top payload bits, force quiet bit so it stays NaN.
		return sign | 0x7c00 | 0x200 | uint16(mant>>13)
	}

	e := exp - 127 + 15 // rebias
	if e >= 0x1f {
		return sign | 0x7c00 // overflow → Inf
	}
	if e <= 0 {
		// Result is subnormal or zero. Shift the full significand
		// (with implicit bit) right so that it is expressed in units of
		// 2^-24, rounding to nearest even.
		if e < -10 {
			// Less than half the smallest subnormal (2^-25) → ±0.
			// e == -10 can still round up to the smallest subnormal.
			return sign
		}
		m := mant | 0x800000
		shift := uint32(14 - e) // 13 for the mantissa width change, +1-e for denormalisation
		half := uint32(1) << (shift - 1)
		rem := m & (1<<shift - 1)
		q := m >> shift
		if rem > half || (rem == half && q&1 == 1) {
			q++
		}
		// q may carry into 0x400, which correctly yields the smallest normal.
		return sign | uint16(q)
	}

	// Normal range.
	q := uint32(e)<<10 | mant>>13
	rem := mant & 0x1fff
	if rem > 0x1000 || (rem == 0x1000 && q&1 == 1) {
		q++ // may carry into exponent; carrying to 0x7c00 correctly yields Inf
	}
	return sign | uint16(q)
}

// BF16ToF32 converts a bfloat16 bit pattern to float32. The conversion is
// exact: bfloat16 is the upper half of a float32.
func BF16ToF32(b uint16) float32 {
	return math.Float32frombits(uint32(b) << 16)
}

// F32ToBF16 converts f to the nearest bfloat16 bit pattern, rounding to
// nearest with ties to even. Overflow rounds to ±Inf; NaN stays NaN (quiet).
func F32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7fffffff > 0x7f800000 { // NaN
		return uint16(b>>16) | 0x40
	}
	b += 0x7fff + (b>>16)&1
	return uint16(b >> 16)
}

// DecodeF16 converts fp16 values in src to float32 in dst. It converts
// min(len(dst), len(src)) elements and returns that count.
func DecodeF16(dst []float32, src []uint16) int {
	t := f16Table
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, h := range src {
		dst[i] = t[h]
	}
	return n
}

// DecodeBF16 converts bfloat16 values in src to float32 in dst. It converts
// min(len(dst), len(src)) elements and returns that count.
func DecodeBF16(dst []float32, src []uint16) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, b := range src {
		dst[i] = math.Float32frombits(uint32(b) << 16)
	}
	return n
}

// EncodeF16 converts float32 values in src to fp16 in dst. It converts
// min(len(dst), len(src)) elements and returns that count.
func EncodeF16(dst []uint16, src []float32) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, f := range src {
		dst[i] = F32ToF16(f)
	}
	return n
}

// EncodeBF16 converts float32 values in src to bfloat16 in dst. It converts
// min(len(dst), len(src)) elements and returns that count.
func EncodeBF16(dst []uint16, src []float32) int {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	for i, f := range src {
		dst[i] = F32ToBF16(f)
	}
	return n
}
