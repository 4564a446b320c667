//go:build (!amd64 || purego) && (!js || !wasm || purego)

package ref

import "github.com/tessera-llm/tessera/core/tensor"

// SIMD128 reports whether matrix-vector products run in the WebAssembly
// SIMD128 kernel module: never in this build (see simd_js.go).
func SIMD128() (bool, string) {
	return false, "this build has no SIMD128 module (not js/wasm, or -tags purego)"
}

// simdRowsDot has no SIMD128 module to run in this build.
func simdRowsDot(W *tensor.Mat, lo, hi int, x, out []float32) bool { return false }

// simdGemm has no SIMD128 module to run in this build.
func simdGemm(W *tensor.Mat, lo, hi int, x []float32, T int, out []float32, ldo int) bool {
	return false
}

// useSIMD128 is false: no SIMD128 module in this build.
func useSIMD128(W *tensor.Mat) bool { return false }

// simdKDAStep has no SIMD128 module to run in this build.
func simdKDAStep(S, k, q, e, v, o []float32, beta float32) bool { return false }

// useSIMDQ8 is false: no SIMD128 module in this build.
func useSIMDQ8(dt tensor.DType) bool { return false }

// simdQ8 has no SIMD128 module to run in this build.
func simdQ8(W *tensor.Mat, lo, hi int, a *actQ8, t0, T int, out []float32, ldo int) bool {
	return false
}

// simdQuantBlocks has no SIMD128 module to run in this build.
func simdQuantBlocks(x []float32, bl int, q []int8, d []float32, s16 []int32) bool { return false }

// simdAxpyRows has no SIMD128 module to run in this build.
func simdAxpyRows(dst, c, R []float32, ld int) bool { return false }

// simdMulRows has no SIMD128 module to run in this build.
func simdMulRows(dst, v []float32) bool { return false }

// simdDotRows has no SIMD128 module to run in this build.
func simdDotRows(out, x, R []float32, ld int) bool { return false }
