//go:build amd64 && !purego

package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Implemented in kernels_amd64.s; callers check useAVX2 and n > 0.

//go:noescape
func dotAVX2(a, b *float32, n int) float32

//go:noescape
func dotBF16AVX2(w *uint16, x *float32, n int) float32

//go:noescape
func dotF16AVX2(w *uint16, x *float32, n int) float32

//go:noescape
func axpyAVX2(a float32, x, y *float32, n int)

//go:noescape
func widenBF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func widenF16AVX2(dst *float32, src *uint16, n int)

//go:noescape
func gemm3x4AVX2(w *float32, ldw int, x *float32, ldx int, n int, out *float32, ldo int)

func dot(a, b []float32) float32 {
	n := len(a)
	if n == 0 || !useAVX2 {
		return dotGeneric(a, b)
	}
	b = b[:n]
	return dotAVX2(&a[0], &b[0], n)
}

func axpy(a float32, x, y []float32) {
	n := len(x)
	if n == 0 || !useAVX2 {
		axpyGeneric(a, x, y)
		return
	}
	y = y[:n]
	axpyAVX2(a, &x[0], &y[0], n)
}

// dotHalf is Σ widen(w[i])·x[i] for F16 or BF16 bits w; buf (len ≥ len(w))
// is scratch for kernels that widen first.
func dotHalf(w []uint16, x []float32, dt tensor.DType, buf []float32) float32 {
	n := len(w)
	if n == 0 || !useAVX2 {
		widenGeneric(buf[:n], w, dt)
		return dotGeneric(buf[:n], x)
	}
	x = x[:n]
	if dt == tensor.F16 {
		return dotF16AVX2(&w[0], &x[0], n)
	}
	return dotBF16AVX2(&w[0], &x[0], n)
}

// widen writes src (F16 or BF16 bits) as float32 into dst[:len(src)].
func widen(dst []float32, src []uint16, dt tensor.DType) {
	n := len(src)
	if n == 0 || !useAVX2 {
		widenGeneric(dst, src, dt)
		return
	}
	dst = dst[:n]
	if dt == tensor.F16 {
		widenF16AVX2(&dst[0], &src[0], n)
	} else {
		widenBF16AVX2(&dst[0], &src[0], n)
	}
}

// gemmTile computes the 3-row × 4-token tile of gemmTileGeneric.
func gemmTile(w []float32, ldw int, x []float32, ldx, n int, out []float32, ldo int) {
	if !useAVX2 || n < 8 {
		gemmTileGeneric(w, ldw, x, ldx, n, out, ldo)
		return
	}
	// Bounds: the kernel reads w[2*ldw+n-1], x[3*ldx+n-1] and writes
	// out[3*ldo+2].
	_ = w[2*ldw+n-1]
	_ = x[3*ldx+n-1]
	_ = out[3*ldo+2]
	gemm3x4AVX2(&w[0], ldw, &x[0], ldx, n, &out[0], ldo)
	if k0 := n &^ 7; k0 < n {
		for t := 0; t < 4; t++ {
			xt := x[t*ldx+k0 : t*ldx+n]
			for r := 0; r < 3; r++ {
				out[t*ldo+r] += dotGeneric(w[r*ldw+k0:r*ldw+n], xt)
			}
		}
	}
}

//go:noescape
func gemm3x4BF16AVX2(w *uint16, ldw int, x *float32, ldx int, n int, out *float32, ldo int)

//go:noescape
func gemm3x4F16AVX2(w *uint16, ldw int, x *float32, ldx int, n int, out *float32, ldo int)

// fusedHalf reports whether gemmTileHalf widens in registers; otherwise
// Linear widens weight rows into scratch once and uses gemmTile.
func fusedHalf() bool { return useAVX2 }

// gemmTileHalf is gemmTile with F16 or BF16 weight bits w, widened in
// registers (only valid when fusedHalf()).
func gemmTileHalf(w []uint16, ldw int, x []float32, ldx, n int, out []float32, ldo int, dt tensor.DType) {
	_ = w[2*ldw+n-1]
	_ = x[3*ldx+n-1]
	_ = out[3*ldo+2]
	if dt == tensor.F16 {
		gemm3x4F16AVX2(&w[0], ldw, &x[0], ldx, n, &out[0], ldo)
	} else {
		gemm3x4BF16AVX2(&w[0], ldw, &x[0], ldx, n, &out[0], ldo)
	}
	if k0 := n &^ 7; k0 < n {
		var buf [8]float32
		for r := 0; r < 3; r++ {
			tail := buf[:n-k0]
			widenGeneric(tail, w[r*ldw+k0:r*ldw+n], dt)
			for t := 0; t < 4; t++ {
				out[t*ldo+r] += dotGeneric(tail, x[t*ldx+k0:t*ldx+n])
			}
		}
	}
}

//go:noescape
func dotQ8AVX2(w *int8, x *float32, n int) float32

//go:noescape
func widenQ8AVX2(dst *float32, src *int8, scale float32, n int)

// dotQ8 is scale·Σ float32(w[i])·x[i] for int8 weights w.
func dotQ8(w []int8, scale float32, x []float32) float32 {
	n := len(w)
	if n == 0 || !useAVX2 {
		return dotQ8Generic(w, scale, x)
	}
	x = x[:n]
	return scale * dotQ8AVX2(&w[0], &x[0], n)
}

// widenQ8 writes scale·float32(src[i]) into dst[:len(src)].
func widenQ8(dst []float32, src []int8, scale float32) {
	n := len(src)
	if n == 0 || !useAVX2 {
		widenQ8Generic(dst, src, scale)
		return
	}
	dst = dst[:n]
	widenQ8AVX2(&dst[0], &src[0], scale, n)
}
