//go:build !amd64 || purego

package ref

import "github.com/tessera-llm/tessera/core/tensor"

func dot(a, b []float32) float32 { return dotGeneric(a, b) }

func axpy(a float32, x, y []float32) { axpyGeneric(a, x, y) }

func dotHalf(w []uint16, x []float32, dt tensor.DType, buf []float32) float32 {
	widenGeneric(buf[:len(w)], w, dt)
	return dotGeneric(buf[:len(w)], x)
}

func widen(dst []float32, src []uint16, dt tensor.DType) { widenGeneric(dst, src, dt) }

func gemmTile(w []float32, ldw int, x []float32, ldx, n int, out []float32, ldo int) {
	gemmTileGeneric(w, ldw, x, ldx, n, out, ldo)
}

func fusedHalf() bool { return false }

func gemmTileHalf(w []uint16, ldw int, x []float32, ldx, n int, out []float32, ldo int, dt tensor.DType) {
	panic("ref: gemmTileHalf without fused kernels")
}

func dotQ8(w []int8, scale float32, x []float32) float32 { return dotQ8Generic(w, scale, x) }

func widenQ8(dst []float32, src []int8, scale float32) { widenQ8Generic(dst, src, scale) }

func rowsDot(W *tensor.Mat, lo, hi int, x, out, buf []float32) {
	if simdRowsDot(W, lo, hi, x, out) {
		return
	}
	rowsDotGeneric(W, lo, hi, x, out, buf)
}

// spinPause is one busy-wait step (no PAUSE instruction here).
func spinPause() {}

func expVec(dst, src []float32)             { expGeneric(dst, src) }
func sigmoidVec(dst, src []float32)         { sigmoidGeneric(dst, src) }
func siluVec(dst, src []float32)            { siluGeneric(dst, src) }
func gluVec(a Act, out, gate, up []float32) { a.gluGeneric(out, gate, up) }

const tileRows = 1

// useTiles: T-token products run as tiles only in the browser's SIMD128
// module (simd_js.go).
func useTiles(W *tensor.Mat) bool { return useSIMD128(W) }

func (j *linearJob) runTiles(lo, hi int, buf []float32) {
	if !simdGemm(j.W, lo, hi, j.x, j.T, j.out, j.W.Rows) {
		panic("ref: runTiles without the SIMD128 module")
	}
}

// The chunked KDA's row-block helpers run in the browser's SIMD128 module
// where it runs and the block is large enough.

func axpyRows(dst, c, R []float32, ld int) {
	if !simdAxpyRows(dst, c, R, ld) {
		axpyRowsGeneric(dst, c, R, ld)
	}
}

func mulRows(dst, v []float32) {
	if !simdMulRows(dst, v) {
		mulRowsGeneric(dst, v)
	}
}

func dotRows(out, x, R []float32, ld int) {
	if !simdDotRows(out, x, R, ld) {
		dotRowsGeneric(out, x, R, ld)
	}
}

func kdaStep(S, k, q, e, v, o []float32, beta float32) {
	if simdKDAStep(S, k, q, e, v, o, beta) {
		return
	}
	kdaStepGeneric(S, k, q, e, v, o, beta)
}

// useAVX512 is false: no AVX-512 kernels on this build.
const useAVX512 = false
