package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// actInputs are values over the whole useful range of the activations:
// zeros, tiny, moderate, the edges of float32 exp, and beyond them.
func actInputs(r *rand.Rand, n int) []float32 {
	edge := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-7, -1e-7, 1e-4, -3e-3,
		0.3465, -0.3466, 0.5, -1, 2, 8, -8, 20, -20, 87, -87, 88.7, -88.7, 89, -89, 103, -104, 1e4, -1e4}
	x := make([]float32, n)
	for i := range x {
		switch {
		case i < len(edge):
			x[i] = edge[i]
		case i%3 == 0:
			x[i] = float32(r.NormFloat64() * 10)
		default:
			x[i] = float32(r.NormFloat64())
		}
	}
	r.Shuffle(n, func(i, j int) { x[i], x[j] = x[j], x[i] })
	return x
}

// near reports |got − want| ≤ rel·|want| + abs.
func near(t *testing.T, want, got, rel, abs float64, msg string, args ...any) {
	t.Helper()
	if math.IsInf(want, 0) && got == want {
		return
	}
	require.LessOrEqual(t, math.Abs(got-want), rel*math.Abs(want)+abs, append([]any{msg + ": want %v got %v"}, append(args, want, got)...)...)
}

// TestActivationsMatchGeneric checks the slice activations (16-lane
// float32 kernels where available) against the scalar float64 forms, at
// every length 0..70 (all tails) and over the whole input range.
func TestActivationsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for n := 0; n <= 70; n++ {
		x := actInputs(r, n)
		y := actInputs(r, n)
		got := make([]float32, n)
		expVec(got, x)
		for i, v := range x {
			near(t, float64(float32(math.Exp(float64(v)))), float64(got[i]), 4e-7, 1e-30, "exp(%v)", v)
		}
		Sigmoids(got, x)
		for i, v := range x {
			near(t, float64(Sigmoid(v)), float64(got[i]), 5e-7, 1e-30, "σ(%v)", v)
		}
		copy(got, x)
		SiLUInPlace(got)
		for i, v := range x {
			near(t, float64(SiLU(v)), float64(got[i]), 5e-7, 1e-30, "SiLU(%v)", v)
		}
		for _, a := range []Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}, {SiTU: true, Beta: 1, BetaLin: 2}, {SiTU: true, Beta: 4}} {
			want := make([]float32, n)
			a.gluGeneric(want, x, y)
			a.GLU(got, x, y)
			for i := range want {
				// |h| is bounded by β·β_lin·(terms ≤ 1): an absolute floor of
				// a few float32 ulps of that scale covers cancellation.
				near(t, float64(want[i]), float64(got[i]), 2e-6, 1e-12, "%+v GLU(%v, %v)", a, x[i], y[i])
			}
			inPlace := make([]float32, n)
			copy(inPlace, x)
			a.GLU(inPlace, inPlace, y)
			require.Equal(t, got, inPlace, "%+v GLU in place", a)
		}
	}
}

func BenchmarkGLU(b *testing.B) {
	r := rand.New(rand.NewPCG(5, 6))
	x, y := actInputs(r, 4096), actInputs(r, 4096)
	out := make([]float32, 4096)
	for _, a := range []Act{{}, {SiTU: true, Beta: 4, BetaLin: 25}} {
		name := "silu"
		if a.SiTU {
			name = "situ"
		}
		b.Run(name, func(b *testing.B) {
			for range b.N {
				a.GLU(out, x, y)
			}
		})
		b.Run(name+"-generic", func(b *testing.B) {
			for range b.N {
				a.gluGeneric(out, x, y)
			}
		})
	}
}
