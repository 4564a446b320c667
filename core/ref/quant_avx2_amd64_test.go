//go:build amd64 && !purego

package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// withInt8Kern runs f with the integer path on kernel set k.
func withInt8Kern(k int8Kernels, f func()) {
	old := int8Kern
	int8Kern = k
	defer func() { int8Kern = old }()
	f()
}

// withInt8Generic runs f with the integer path on the generic kernels.
func withInt8Generic(f func()) { withInt8Kern(kernGo, f) }

// TestInt8AVX2Path forces the AVX2 kernels (the path of CPUs without
// AVX-512 VNNI) on this CPU and runs the integer path's checks on them:
// against rowDotQ8 and the float32 path at every cut, prefill against
// decode for any number of workers, and, where the CPU has VNNI too,
// against the VNNI kernels bit for bit (decode and prefill, every cut)
// for the formats with an AVX2 kernel.
func TestInt8AVX2Path(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 on this CPU")
	}
	withInt8Kern(kernAVX2, func() {
		require.Equal(t, kernAVX2, int8KernOf(tensor.MXFP4))
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
	for _, dt := range int8Formats {
		if avx2Kernels[dt] == nil {
			continue
		}
		for _, blocks := range []int{1, 2, 3, 5, 16} {
			cols := dt.BlockLen() * blocks
			for _, rows := range []int{1, 2, 3, 4, 5, 9, 70} {
				W, _ := randomBlocked(rng, dt, rows, cols)
				for _, T := range []int{1, 3, 8, 13} {
					x := make([]float32, T*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					vnni, avx2 := make([]float32, T*rows), make([]float32, T*rows)
					withInt8Blocks(true, func() {
						withInt8Kern(kernVNNI, func() { Linear(p, vnni, x, T, W) })
						withInt8Kern(kernAVX2, func() { Linear(p, avx2, x, T, W) })
					})
					require.Equal(t, vnni, avx2, fmt.Sprintf("%v %dx%d T%d", dt, rows, cols, T))
					ran++
				}
			}
		}
	}
	require.NotZero(t, ran)
}

// TestInt8GenericPath runs the integer path's checks on the generic
// kernels (the path of amd64 CPUs without AVX2, purego and js/wasm
// builds, and of formats without an AVX2 kernel on AVX2 CPUs).
func TestInt8GenericPath(t *testing.T) {
	withInt8Generic(func() {
		require.Equal(t, kernGo, int8KernOf(tensor.Q4K))
		t.Run("reference", TestInt8KernelsMatchReference)
		t.Run("prefill", TestInt8LinearTokensMatchDecode)
	})
}

// TestInt8KernelsMatchGeneric cross-checks each SIMD kernel set this CPU
// has (AVX-512 VNNI, AVX2) against the generic kernels through Linear, for
// every format, at every cut: rows around the four-row groups, odd block
// counts, tokens around the 2×4, 2×8 and AVX2 one-row tiles. They compute
// the same integer sums, so they differ only by the order of the float32
// additions: within 2⁻²⁰ of Σ|w·x|.
func TestInt8KernelsMatchGeneric(t *testing.T) {
	var sets []int8Kernels
	if useVNNI {
		sets = append(sets, kernVNNI)
	}
	if useAVX2 {
		sets = append(sets, kernAVX2)
	}
	if len(sets) == 0 {
		t.Skip("no SIMD integer kernels on this CPU")
	}
	rng := rand.New(rand.NewPCG(15, 14))
	p := NewPool(2)
	defer p.Close()
	for _, dt := range int8Formats {
		for _, blocks := range []int{1, 2, 3, 5, 8} {
			cols := dt.BlockLen() * blocks
			for _, rows := range []int{1, 2, 3, 4, 5, 7, 9, 70} {
				W, F := randomBlocked(rng, dt, rows, cols)
				for _, T := range []int{1, 2, 3, 4, 5, 7, 8, 9, 12, 17} {
					x := make([]float32, T*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					want := make([]float32, T*rows)
					withInt8Blocks(true, func() { withInt8Generic(func() { Linear(p, want, x, T, W) }) })
					for _, k := range sets {
						got := make([]float32, T*rows)
						withInt8Blocks(true, func() { withInt8Kern(k, func() { Linear(p, got, x, T, W) }) })
						for tt := range T {
							for o := range rows {
								var mag float64
								for i := range cols {
									mag += math.Abs(float64(F.F32[o*cols+i]) * float64(x[tt*cols+i]))
								}
								require.InDelta(t, want[tt*rows+o], got[tt*rows+o], 1e-6*(1+mag),
									"%v kernels %d: %dx%d T%d row %d token %d", dt, k, rows, cols, T, o, tt)
							}
						}
					}
				}
			}
		}
	}
}

// BenchmarkInt8Kernels times decode (T = 1) and a 16-token prefill of a
// 1024×1024 matrix of each integer-path format on each kernel set this
// CPU has (vnni, avx2, go: the generic kernels) and on the float32 path
// (bytes/s: weight bytes read).
func BenchmarkInt8Kernels(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 10))
	sets := []struct {
		name string
		k    int8Kernels
		ok   bool
	}{{"vnni", kernVNNI, useVNNI}, {"avx2", kernAVX2, useAVX2}, {"go", kernGo, true}, {"float32", int8Kern, true}}
	for _, dt := range int8Formats {
		W, _ := randomBlocked(rng, dt, 1024, 1024)
		for _, T := range []int{1, 16} {
			x := make([]float32, T*W.Cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			out := make([]float32, T*W.Rows)
			for _, s := range sets {
				if !s.ok {
					continue
				}
				b.Run(fmt.Sprintf("%v/T%d/%s", dt, T, s.name), func(b *testing.B) {
					p := NewPool(1)
					defer p.Close()
					withInt8Blocks(s.name != "float32", func() {
						withInt8Kern(s.k, func() {
							b.SetBytes(int64(len(W.Q)))
							for b.Loop() {
								Linear(p, out, x, T, W)
							}
						})
					})
				})
			}
		}
	}
}
