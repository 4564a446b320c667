package ref

// The browser's SIMD128 kernel module (simd_js.go), generated and assembled
// (wat2wasm from Debian's wabt):
//go:generate sh -c "python3 ../../scripts/gen/simd128.py > simd128/kernels.wat && wat2wasm simd128/kernels.wat -o simd128/kernels.wasm"

import (
	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Portable kernels. They are the fallback where no SIMD kernel applies
// (other architectures, the purego build tag, CPUs without AVX2+FMA) and
// the reference the assembly kernels are tested against.

// dotGeneric is Σ a[i]·b[i] with four partial sums.
func dotGeneric(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += a[i]*b[i] + a[i+4]*b[i+4]
		s1 += a[i+1]*b[i+1] + a[i+5]*b[i+5]
		s2 += a[i+2]*b[i+2] + a[i+6]*b[i+6]
		s3 += a[i+3]*b[i+3] + a[i+7]*b[i+7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// axpyGeneric computes y[i] += a·x[i].
func axpyGeneric(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// widenGeneric widens half-precision bits src (F16 or BF16) into dst.
func widenGeneric(dst []float32, src []uint16, dt tensor.DType) {
	if dt == tensor.F16 {
		half.DecodeF16(dst, src)
	} else {
		half.DecodeBF16(dst, src)
	}
}

// gemmTileGeneric computes the 3-row × 4-token tile
// out[t*ldo+r] = Σ_{k<n} w[r*ldw+k]·x[t*ldx+k] for r < 3, t < 4,
// reusing each loaded weight for four tokens.
func gemmTileGeneric(w []float32, ldw int, x []float32, ldx, n int, out []float32, ldo int) {
	w0, w1, w2 := w[:n], w[ldw:ldw+n], w[2*ldw:2*ldw+n]
	x0, x1, x2, x3 := x[:n], x[ldx:ldx+n], x[2*ldx:2*ldx+n], x[3*ldx:3*ldx+n]
	var s00, s01, s02, s10, s11, s12, s20, s21, s22, s30, s31, s32 float32
	for k := range w0 {
		a, b, c := w0[k], w1[k], w2[k]
		v := x0[k]
		s00 += a * v
		s01 += b * v
		s02 += c * v
		v = x1[k]
		s10 += a * v
		s11 += b * v
		s12 += c * v
		v = x2[k]
		s20 += a * v
		s21 += b * v
		s22 += c * v
		v = x3[k]
		s30 += a * v
		s31 += b * v
		s32 += c * v
	}
	out[0], out[1], out[2] = s00, s01, s02
	out[ldo], out[ldo+1], out[ldo+2] = s10, s11, s12
	out[2*ldo], out[2*ldo+1], out[2*ldo+2] = s20, s21, s22
	out[3*ldo], out[3*ldo+1], out[3*ldo+2] = s30, s31, s32
}

// dotQ8Generic is scale·Σ float32(w[i])·x[i].
func dotQ8Generic(w []int8, scale float32, x []float32) float32 {
	x = x[:len(w)]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= len(w); i += 4 {
		s0 += float32(w[i]) * x[i]
		s1 += float32(w[i+1]) * x[i+1]
		s2 += float32(w[i+2]) * x[i+2]
		s3 += float32(w[i+3]) * x[i+3]
	}
	for ; i < len(w); i++ {
		s0 += float32(w[i]) * x[i]
	}
	return scale * ((s0 + s1) + (s2 + s3))
}

// widenQ8Generic writes scale·float32(src[i]) into dst.
func widenQ8Generic(dst []float32, src []int8, scale float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = scale * float32(v)
	}
}
