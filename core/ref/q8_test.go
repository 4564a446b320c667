package ref

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// The int8 kernels equal their pure-Go versions for every length and
// offset, and Linear over Q8 weights equals Linear over the dequantized
// float32 weights.
func TestQ8Kernels(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 8))
	for n := 0; n <= 130; n++ {
		for off := 0; off < 3; off++ {
			w := make([]int8, n+off)
			for i := range w {
				w[i] = int8(r.IntN(255) - 127)
			}
			x := randVec(r, n+off, 1)
			got := dotQ8(w[off:], 0.03, x[off:])
			want := dotQ8Generic(w[off:], 0.03, x[off:])
			require.InDelta(t, want, got, float64(1e-4*(1+abs32(want))), "n=%d off=%d", n, off)
			a, b := make([]float32, n), make([]float32, n)
			widenQ8(a, w[off:], 0.5)
			widenQ8Generic(b, w[off:], 0.5)
			require.Equal(t, b, a, "widen n=%d off=%d", n, off)
		}
	}
}

func abs32(x float32) float32 {
	if x < 0 {
		return -x
	}
	return x
}

func TestLinearQ8(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 9))
	p := NewPool(2)
	defer p.Close()
	for _, sh := range [][3]int{{1, 37, 5}, {3, 64, 9}, {4, 100, 7}, {17, 65, 13}, {64, 128, 33}} {
		T, in, out := sh[0], sh[1], sh[2]
		q := tensor.Quantize(tensor.NewF32(out, in, randVec(r, out*in, 1)))
		deq := tensor.NewF32(out, in, q.Float32())
		x := randVec(r, T*in, 1)
		got, want := make([]float32, T*out), make([]float32, T*out)
		Linear(p, got, x, T, q)
		Linear(p, want, x, T, deq)
		require.Less(t, maxRelErr(got, want), 1e-5, "shape %v", sh)
	}
	// Quantization itself: per-row max maps to ±127, error ≤ scale/2.
	w := []float32{0.5, -1, 0.25, 0, 0, 0}
	q := tensor.Quantize(tensor.NewF32(2, 3, w))
	require.Equal(t, []int8{64, -127, 32, 0, 0, 0}, q.I8)
	require.Equal(t, float32(0), q.Scale[1])
}
