//go:build !amd64 || purego

package ref

import "github.com/tessera-llm/tessera/core/tensor"

// fastBlockDot has no SIMD kernels on this platform: blockRowDot
// dequantizes the row instead.
func fastBlockDot(W *tensor.Mat, o int, x, buf []float32) (float32, bool) { return 0, false }
