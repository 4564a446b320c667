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
