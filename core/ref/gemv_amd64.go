//go:build amd64 && !purego

package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Implemented in gemv_avx512_amd64.s: four rows of W (leading dimension
// ldw elements) against x over n elements (a multiple of 16), sums into
// out[0:4], prefetching pf bytes ahead in each row.

//go:noescape
func gemv4BF16AVX512(w *uint16, ldw int, x *float32, n int, out *float32, pf int)

//go:noescape
func gemv4F16AVX512(w *uint16, ldw int, x *float32, n int, out *float32, pf int)

//go:noescape
func gemv4F32AVX512(w *float32, ldw int, x *float32, n int, out *float32, pf int)

//go:noescape
func gemv4Q8AVX512(w *int8, ldw int, x *float32, n int, out *float32, pf int)

// useAVX512 reports whether the AVX-512 kernels may run: AVX512F, and the
// OS saves the ZMM state (on top of the AVX2 requirements).
var useAVX512 = useAVX2 && detectAVX512()

func detectAVX512() bool {
	_, ebx7, _, _ := cpuid(7, 0)
	if ebx7&(1<<16) == 0 { // AVX512F
		return false
	}
	xcr0, _ := xgetbv()
	return xcr0&0xe6 == 0xe6 // XMM, YMM, opmask, ZMM0-15, ZMM16-31
}

// gemvPrefetch is how far ahead (bytes) each row stream of the AVX-512
// GEMV prefetches.
var gemvPrefetch = 1024

// rowsDot writes out[o-lo] = W[o, :]·x for lo ≤ o < hi with the streaming
// kernel of W's dtype: four rows at a time on AVX-512, one at a time
// otherwise (buf: scratch of W.Cols floats). A row's result does not depend
// on lo and hi (leftover rows run the four-row kernel on one row), so any
// split of the rows over workers gives the same bits.
func rowsDot(W *tensor.Mat, lo, hi int, x, out, buf []float32) {
	out = out[:hi-lo]
	if !useAVX512 || W.Cols < 16 {
		for o := lo; o < hi; o++ {
			out[o-lo] = rowDot(W, o, x, buf)
		}
		return
	}
	var one [4]float32
	for o := lo; o < hi; {
		if o+4 <= hi {
			gemv4(W, o, W.Cols, x, (*[4]float32)(out[o-lo:o-lo+4]))
			o += 4
			continue
		}
		gemv4(W, o, 0, x, &one) // ldw 0: the same row four times
		out[o-lo] = one[0]
		o++
	}
}

// gemv4 sets s[r] = W[o+r, :]·x for r < 4, reading rows ldw elements apart
// (ldw = W.Cols: four consecutive rows; 0: row o four times).
func gemv4(W *tensor.Mat, o, ldw int, x []float32, s *[4]float32) {
	in := W.Cols
	n16 := in &^ 15
	x = x[:in]
	end := o*in + 3*ldw + in // one past the last element read
	switch W.DType {
	case tensor.F32:
		w := W.F32[o*in : end]
		gemv4F32AVX512(&w[0], ldw, &x[0], n16, &s[0], gemvPrefetch)
		if n16 < in {
			for r := range 4 {
				s[r] += dotGeneric(w[r*ldw+n16:r*ldw+in], x[n16:])
			}
		}
	case tensor.Q8:
		w := W.I8[o*in : end]
		gemv4Q8AVX512(&w[0], ldw, &x[0], n16, &s[0], gemvPrefetch)
		for r := range 4 {
			if n16 < in {
				s[r] += dotQ8Generic(w[r*ldw+n16:r*ldw+in], 1, x[n16:])
			}
			s[r] *= W.Scale[o+min(r, ldw)]
		}
	default:
		w := W.U16[o*in : end]
		if W.DType == tensor.F16 {
			gemv4F16AVX512(&w[0], ldw, &x[0], n16, &s[0], gemvPrefetch)
		} else {
			gemv4BF16AVX512(&w[0], ldw, &x[0], n16, &s[0], gemvPrefetch)
		}
		if n16 < in {
			var tail [16]float32
			for r := range 4 {
				widenGeneric(tail[:in-n16], w[r*ldw+n16:r*ldw+in], W.DType)
				s[r] += dotGeneric(tail[:in-n16], x[n16:])
			}
		}
	}
}
