//go:build amd64 && !purego

package ref

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// withInt8AVX2 runs f with the integer path on the AVX2 kernels (on) or
// the VNNI kernels (off).
func withInt8AVX2(on bool, f func()) {
	old := int8AVX2
	int8AVX2 = on
	defer func() { int8AVX2 = old }()
	f()
}

// TestInt8AVX2Path forces the AVX2 kernels (the path of CPUs without
// AVX-512 VNNI) on this CPU and runs the integer path's checks on them:
// against rowDotQ8 and the float32 path at every cut, prefill against
// decode for any number of workers, and, where the CPU has VNNI too,
// against the VNNI kernels bit for bit (decode and prefill, every cut).
func TestInt8AVX2Path(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	withInt8AVX2(true, func() {
		require.False(t, hasInt8Kernel(tensor.Q4K), "the K-quants stay float32 on AVX2")
		require.True(t, hasInt8Kernel(tensor.MXFP4))
		t.Run("reference", TestInt8KernelsMatchReference)
		t.Run("prefill", TestInt8LinearTokensMatchDecode)
	})
	if !useVNNI {
		return
	}
	rng := rand.New(rand.NewPCG(15, 12))
	p := NewPool(2)
	defer p.Close()
	ran := 0
	for _, dt := range []tensor.DType{tensor.Q4_0, tensor.MXFP4, tensor.Q8_0} {
		for _, blocks := range []int{1, 2, 3, 5, 16} {
			cols := 32 * blocks
			for _, rows := range []int{1, 2, 3, 4, 5, 9, 70} {
				W, _ := randomBlocked(rng, dt, rows, cols)
				for _, T := range []int{1, 3, 8, 13} {
					x := make([]float32, T*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					vnni, avx2 := make([]float32, T*rows), make([]float32, T*rows)
					withInt8Blocks(true, func() {
						withInt8AVX2(false, func() { Linear(p, vnni, x, T, W) })
						withInt8AVX2(true, func() { Linear(p, avx2, x, T, W) })
					})
					require.Equal(t, vnni, avx2, fmt.Sprintf("%v %dx%d T%d", dt, rows, cols, T))
					ran++
				}
			}
		}
	}
	require.NotZero(t, ran)
}
