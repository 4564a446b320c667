//go:build !amd64 || purego

package ref

import "github.com/tessera-llm/tessera/core/tensor"

// fastBlockDot has no SIMD kernels on this platform: blockRowDot
// dequantizes the row instead.
func fastBlockDot(W *tensor.Mat, o int, x, buf []float32) (float32, bool) { return 0, false }

// fastDequantRows has no SIMD kernels on this platform.
func fastDequantRows(W *tensor.Mat, o0, n int, dst, sc []float32) bool { return false }

// hasAVX2 is false: no SIMD block kernels in this build.
func hasAVX2() bool { return false }

// gemv4Q8 is the four-row kernel's result from the browser's SIMD128
// module (simd_js.go) or the generic kernel: s[4g + r] for row
// o + (4g + r)·ldwRows (ldwRows 1: ng groups of four rows; 0: row o four
// times).
func gemv4Q8(W *tensor.Mat, o, ldwRows, ng int, a *actQ8, t int, s []float32) {
	if ldwRows == 1 && simdQ8(W, o, o+4*ng, a, t, 1, s, 4*ng) {
		return
	}
	if ldwRows == 0 && simdQ8(W, o, o+1, a, t, 1, s, 1) {
		s[1], s[2], s[3] = s[0], s[0], s[0]
		return
	}
	q8Generic(W, o, 4*ng, ldwRows, a, t, 1, s, 4*ng)
}

// simdQ8On is false while SetInt8Kernels("go") keeps the browser's
// integer path on the generic kernels.
var simdQ8On = true

// int8KernelSets is "simd128" (the browser's SIMD128 module, where it
// runs) and the generic kernels.
func int8KernelSets() []string {
	if ok, _ := SIMD128(); ok {
		return []string{"simd128", "go"}
	}
	return []string{"go"}
}

func int8KernelSet() string {
	if ok, _ := SIMD128(); ok && simdQ8On {
		return "simd128"
	}
	return "go"
}

func setInt8KernelSet(name string) { simdQ8On = name == "simd128" }

// genericInt8 reports whether the generic kernels take dt (every format
// but those of the SIMD128 module).
func genericInt8(dt tensor.DType) bool { return !useSIMDQ8(dt) }

// prefillQ8 runs the SIMD128 module's kernels where they take W's format,
// prefillGeneric elsewhere.
func prefillQ8(W *tensor.Mat, lo, hi int, a *actQ8, out []float32) {
	if simdQ8(W, lo, hi, a, 0, a.T, out[lo:], W.Rows) {
		addOddBlock(W, lo, hi, a, 0, a.T, out[lo:], W.Rows)
		return
	}
	prefillGeneric(W, lo, hi, a, out)
}

// prepareTiles does nothing: no AMX kernels in this build.
func prepareTiles(W *tensor.Mat, a *actQ8) {}

// amxTakes is false: no AMX kernels in this build.
func amxTakes(W *tensor.Mat, T int) bool { return false }

// quantBlocks is quantBlocksGeneric, in the browser's SIMD128 module where
// it runs.
func quantBlocks(x []float32, bl int, q []int8, d []float32, s16 []int32) {
	if simdQuantBlocks(x, bl, q, d, s16) {
		return
	}
	quantBlocksGeneric(x, bl, q, d, s16)
}
