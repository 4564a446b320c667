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

// gemv4Q8 is the four-row kernel's result from the generic kernel:
// s[4g + r] for row o + (4g + r)·ldwRows (ldwRows 1: ng groups of four
// rows; 0: row o four times).
func gemv4Q8(W *tensor.Mat, o, ldwRows, ng int, a *actQ8, t int, s []float32) {
	q8Generic(W, o, 4*ng, ldwRows, a, t, 1, s, 4*ng)
}

// int8KernelSets is the generic kernels alone.
func int8KernelSets() []string { return []string{"go"} }

func int8KernelSet() string { return "go" }

func setInt8KernelSet(string) {}

// genericInt8 is true: the generic kernels take every format.
func genericInt8(dt tensor.DType) bool { return true }

// prefillQ8 is prefillGeneric: the generic kernels take every format.
func prefillQ8(W *tensor.Mat, lo, hi int, a *actQ8, out []float32) {
	prefillGeneric(W, lo, hi, a, out)
}

// prepareTiles does nothing: no AMX kernels in this build.
func prepareTiles(W *tensor.Mat, a *actQ8) {}

// amxTakes is false: no AMX kernels in this build.
func amxTakes(W *tensor.Mat, T int) bool { return false }

// quantBlocks is quantBlocksGeneric.
func quantBlocks(x []float32, bl int, q []int8, d []float32, s16 []int32) {
	quantBlocksGeneric(x, bl, q, d, s16)
}
