package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/core/tensor"
)

// randomBlocked returns a rows×cols matrix of block dtype dt with random
// blocks (finite fp16 scales kept small so products stay in range) and its
// dequantized float32 copy.
func randomBlocked(rng *rand.Rand, dt tensor.DType, rows, cols int) (*tensor.Mat, *tensor.Mat) {
	q := make([]byte, rows*dt.RowBytes(cols))
	for i := range q {
		q[i] = byte(rng.Uint32())
	}
	bb := dt.BlockBytes()
	for b := 0; b < len(q)/bb; b++ {
		blk := q[b*bb : (b+1)*bb]
		var halves []int
		switch dt {
		case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0:
			halves = []int{0}
		case tensor.Q4_1, tensor.Q5_1, tensor.Q4K, tensor.Q5K:
			halves = []int{0, 2}
		case tensor.Q6K:
			halves = []int{208}
		case tensor.MXFP4:
			blk[0] = 120 + byte(rng.IntN(10)) // 2^-8 … 2^1
		}
		for _, h := range halves {
			blk[h+1] = 0x20 + byte(rng.IntN(8)) // fp16 exponent 8…9: |d| ≈ 2^-7
		}
	}
	W, err := tensor.NewBlocked(rows, cols, dt, q)
	if err != nil {
		panic(err)
	}
	return W, tensor.NewF32(rows, cols, W.Float32())
}

// TestLinearBlockedMatchesDequantized checks Linear and LinearBatch on
// block-format weights against the same products on the dequantized
// float32 matrix, across block boundaries (one to three blocks per row),
// row counts around the 3-row and 4-row tiles and token counts around the
// 4-token tile, on the float32 path (TestInt8KernelsMatchReference covers
// the integer one).
func TestLinearBlockedMatchesDequantized(t *testing.T) {
	withInt8Blocks(false, func() { testLinearBlockedMatchesDequantized(t) })
}

func testLinearBlockedMatchesDequantized(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 3))
	dts := []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.Q4K, tensor.Q5K, tensor.Q6K, tensor.MXFP4}
	for _, workers := range []int{1, 2} {
		p := NewPool(workers)
		defer p.Close()
		for _, dt := range dts {
			for _, blocks := range []int{1, 2, 3} {
				cols := blocks * dt.BlockLen()
				for _, rows := range []int{1, 2, 3, 4, 5, 7, 13} {
					W, F := randomBlocked(rng, dt, rows, cols)
					for _, T := range []int{1, 2, 3, 4, 5, 8, 11} {
						name := fmt.Sprintf("%v/%dx%d/T%d/w%d", dt, rows, cols, T, workers)
						x := make([]float32, T*cols)
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
						got, want, mag := make([]float32, T*rows), make([]float32, T*rows), make([]float32, T*rows)
						Linear(p, got, x, T, W)
						Linear(p, want, x, T, F)
						Linear(p, mag, abs(x), T, tensor.NewF32(rows, cols, abs(F.F32)))
						assertClose(t, name, got, want, mag)
						if T == 1 {
							LinearBatch(p, []GEMV{{W: W, X: x, Out: got}, {W: F, X: x, Out: want}})
							assertClose(t, name+"/batch", got, want, mag)
						}
					}
				}
			}
		}
	}
}

func abs(x []float32) []float32 {
	y := make([]float32, len(x))
	for i, v := range x {
		y[i] = float32(math.Abs(float64(v)))
	}
	return y
}

// assertClose requires |got − want| ≤ 1e-6·(1 + mag), mag = Σ|w||x| (the
// rounding scale of a dot product whose terms cancel).
func assertClose(t *testing.T, name string, got, want, mag []float32) {
	t.Helper()
	for i := range want {
		tol := 1e-6 * (1 + float64(mag[i]))
		if math.Abs(float64(got[i]-want[i])) > tol || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s: element %d: got %v, want %v", name, i, got[i], want[i])
		}
	}
}

// TestFastDequantRowsBitExact: the SIMD dequantizer used for prefill
// writes tensor.Dequantize's bits (ggml's reference values).
func TestFastDequantRowsBitExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 4))
	ran := 0
	defer func() {
		if ran == 0 && hasAVX2() {
			t.Fatal("no format ran through the SIMD dequantizer")
		}
	}()
	for _, dt := range []tensor.DType{tensor.Q4_0, tensor.Q4K, tensor.MXFP4, tensor.Q8_0} {
		for _, blocks := range []int{1, 2, 3} {
			cols := blocks * dt.BlockLen()
			W, F := randomBlocked(rng, dt, 5, cols)
			got := make([]float32, 3*cols)
			if !fastDequantRows(W, 1, 3, got, make([]float32, cols)) {
				continue // no kernel for dt here
			}
			ran++
			want := F.F32[cols : 4*cols]
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
					t.Fatalf("%v %d cols: element %d: %v, want %v", dt, cols, i, got[i], want[i])
				}
			}
		}
	}
}
