package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// dotTol is the float32 rounding allowance of a dot product: a few ulps of
// Σ|a_i·b_i| per log2(n) of summation depth, and a tiny absolute floor.
func dotTol(a, b []float32) float64 {
	var s float64
	for i := range a {
		s += math.Abs(float64(a[i]) * float64(b[i]))
	}
	return s*float64(len(a)+8)*6e-8 + 1e-30
}

func halfBits(r *rand.Rand, n int, dt tensor.DType) []uint16 {
	h := make([]uint16, n)
	for i := range h {
		f := float32(r.NormFloat64())
		if dt == tensor.F16 {
			h[i] = half.F32ToF16(f)
		} else {
			h[i] = half.F32ToBF16(f)
		}
	}
	return h
}

// TestKernelsMatchGeneric checks the dispatched (possibly SIMD) kernels
// against the portable ones for every length 0..130 (all remainders of
// every unrolling) at several element offsets, i.e. alignments.
func TestKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for n := 0; n <= 130; n++ {
		for _, off := range []int{0, 1, 3, 5 + r.IntN(11)} {
			a := randVec(r, n+off+3, 1)[off : off+n]
			b := randVec(r, n+2*off+1, 1)[2*off : 2*off+n]
			got, want := dot(a, b), dotGeneric(a, b)
			require.InDelta(t, want, got, dotTol(a, b), "dot n=%d off=%d", n, off)

			y0 := randVec(r, n+off, 1)[off:]
			y1 := append([]float32(nil), y0...)
			alpha := float32(r.NormFloat64())
			axpy(alpha, a, y0)
			axpyGeneric(alpha, a, y1)
			for i := range y1 {
				require.InDelta(t, y1[i], y0[i], 1e-6*(math.Abs(float64(y1[i]))+math.Abs(float64(alpha*a[i])))+1e-30, "axpy n=%d i=%d", n, i)
			}

			for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
				hb := halfBits(r, n+off, dt)[off:]
				wide := make([]float32, n+1)
				wide[n] = 42 // must stay untouched
				widen(wide[:n], hb, dt)
				ref := make([]float32, n)
				widenGeneric(ref, hb, dt)
				require.Equal(t, ref, wide[:n], "widen %v n=%d", dt, n)
				require.Equal(t, float32(42), wide[n])
				got := dotHalf(hb, b, dt, make([]float32, n))
				require.InDelta(t, dotGeneric(ref, b), got, dotTol(ref, b), "dotHalf %v n=%d off=%d", dt, n, off)
			}

			// 3×4 GEMM tile with leading dimensions larger than n.
			ldw, ldx, ldo := n+off+1, n+2*off+3, 3+off
			w := randVec(r, 3*ldw, 1)
			x := randVec(r, 4*ldx, 1)
			o1 := make([]float32, 4*ldo)
			o2 := make([]float32, 4*ldo)
			gemmTile(w, ldw, x, ldx, n, o1, ldo)
			gemmTileGeneric(w, ldw, x, ldx, n, o2, ldo)
			for tt := 0; tt < 4; tt++ {
				for rr := 0; rr < 3; rr++ {
					wr, xt := w[rr*ldw:rr*ldw+n], x[tt*ldx:tt*ldx+n]
					require.InDelta(t, o2[tt*ldo+rr], o1[tt*ldo+rr], dotTol(wr, xt), "gemm n=%d r=%d t=%d", n, rr, tt)
				}
			}
			for i, v := range o1 {
				if i%ldo >= 3 {
					require.Zero(t, v, "gemm tile wrote outside n=%d i=%d", n, i)
				}
			}
		}
	}
}

// TestWidenF16AllPatterns widens every non-NaN fp16 pattern exactly.
func TestWidenF16AllPatterns(t *testing.T) {
	src := make([]uint16, 0, 1<<16)
	for i := 0; i < 1<<16; i++ {
		if i&0x7c00 == 0x7c00 && i&0x3ff != 0 {
			continue // NaN: payload quieting may differ, still NaN
		}
		src = append(src, uint16(i))
	}
	got := make([]float32, len(src))
	widen(got, src, tensor.F16)
	for i, h := range src {
		require.Equal(t, math.Float32bits(half.F16ToF32(h)), math.Float32bits(got[i]), "%#04x", h)
	}
	nan := []uint16{0x7c01, 0xfe00, 0x7fff}
	out := make([]float32, 3)
	widen(out, nan, tensor.F16)
	for _, v := range out {
		require.True(t, math.IsNaN(float64(v)))
	}
}

// TestLinearTiles covers every tile remainder of Linear (rows mod 3, tokens
// mod 4, inner length mod 8) for all weight types against float64 sums.
func TestLinearTiles(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := NewPool(2)
	defer p.Close()
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, T := range []int{1, 2, 3, 4, 5, 8, 11, 64} {
			for _, in := range []int{1, 7, 8, 9, 33, 130} {
				for _, outN := range []int{1, 2, 3, 4, 7, 35} {
					var W *tensor.Mat
					var wf []float32
					if dt == tensor.F32 {
						wf = randVec(r, outN*in, 1)
						W = tensor.NewF32(outN, in, wf)
					} else {
						W = tensor.NewHalf(outN, in, dt, halfBits(r, outN*in, dt))
						wf = W.Float32()
					}
					x := randVec(r, T*in, 1)
					got := make([]float32, T*outN)
					Linear(p, got, x, T, W)
					for tt := 0; tt < T; tt++ {
						for o := 0; o < outN; o++ {
							wr, xt := wf[o*in:(o+1)*in], x[tt*in:(tt+1)*in]
							var s float64
							for i := range wr {
								s += float64(wr[i]) * float64(xt[i])
							}
							require.InDelta(t, s, got[tt*outN+o], dotTol(wr, xt), "%v T=%d in=%d out=%d t=%d o=%d", dt, T, in, outN, tt, o)
						}
					}
				}
			}
		}
	}
}

func BenchmarkLinear(b *testing.B) {
	cases := []struct {
		name       string
		T, in, out int
		dt         tensor.DType
	}{
		{"gemv-f32-4096", 1, 4096, 4096, tensor.F32},
		{"gemv-bf16-4096", 1, 4096, 4096, tensor.BF16},
		{"gemv-bf16-8192x32768", 1, 8192, 32768, tensor.BF16}, // 512 MiB: beyond the caches
		{"gemv-f16-4096", 1, 4096, 4096, tensor.F16},
		{"gemm-f32-T64-1024", 64, 1024, 1024, tensor.F32},
		{"gemm-bf16-T64-1024", 64, 1024, 1024, tensor.BF16},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			var W *tensor.Mat
			if c.dt == tensor.F32 {
				W = tensor.NewF32(c.out, c.in, randVec(r, c.in*c.out, 1))
			} else {
				W = tensor.NewHalf(c.out, c.in, c.dt, halfBits(r, c.in*c.out, c.dt))
			}
			x := randVec(r, c.T*c.in, 1)
			out := make([]float32, c.T*c.out)
			p := NewPool(0)
			defer p.Close()
			b.SetBytes(W.Bytes())
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				Linear(p, out, x, c.T, W)
			}
			b.ReportMetric(2*float64(c.T*c.in*c.out)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkDot(b *testing.B) {
	for _, n := range []int{64, 128, 1024} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 1))
			x, y := randVec(r, n, 1), randVec(r, n, 1)
			b.SetBytes(int64(8 * n))
			var s float32
			for i := 0; i < b.N; i++ {
				s += Dot(x, y)
			}
			_ = s
		})
	}
}

// LinearBatch equals Linear (T = 1) product by product, bit for bit, over
// dtypes and shapes that straddle the workers' row split.
func TestLinearBatchEqualsLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	p := NewPool(2)
	defer p.Close()
	var gs []GEMV
	var want [][]float32
	for i, s := range [][2]int{{1, 1}, {7, 33}, {130, 64}, {3, 1000}, {257, 17}} {
		rows, cols := s[0], s[1]
		var W *tensor.Mat
		switch dt := []tensor.DType{tensor.F32, tensor.BF16, tensor.F16, tensor.Q8, tensor.F32}[i]; dt {
		case tensor.F32:
			W = tensor.NewF32(rows, cols, randVec(r, rows*cols, 1))
		case tensor.Q8:
			W = tensor.Quantize(tensor.NewF32(rows, cols, randVec(r, rows*cols, 1)))
		default:
			W = tensor.NewHalf(rows, cols, dt, halfBits(r, rows*cols, dt))
		}
		x := randVec(r, cols, 1)
		w := make([]float32, rows)
		Linear(p, w, x, 1, W)
		want = append(want, w)
		gs = append(gs, GEMV{W: W, X: x, Out: make([]float32, rows)})
	}
	LinearBatch(p, gs)
	for i, g := range gs {
		for o := range g.Out {
			if g.Out[o] != want[i][o] {
				t.Fatalf("product %d row %d: batch %v, Linear %v", i, o, g.Out[o], want[i][o])
			}
		}
	}
}
