//go:build js && wasm && !purego

package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// requireSIMD128 fails the test (skips outside CI) when the kernel module
// is not active: run through scripts/wasm/exec.sh, which sets
// globalThis.wasm as the browser worker does.
func requireSIMD128(t *testing.T) {
	t.Helper()
	if ok, why := SIMD128(); !ok {
		if os.Getenv("CI") == "true" {
			t.Fatalf("SIMD128 kernels inactive under CI: %s (run with -exec scripts/wasm/exec.sh)", why)
		}
		t.Skipf("SIMD128 kernels inactive: %s (run with -exec scripts/wasm/exec.sh)", why)
	}
}

// TestSIMD128WidensEveryHalf: a 65536×1 matrix holding every F16 (and
// BF16) bit pattern times x = [1] gives exactly the pure-Go widening of
// each (as a sum from +0), NaNs as NaNs: the module's F16 conversion is exact everywhere.
func TestSIMD128WidensEveryHalf(t *testing.T) {
	requireSIMD128(t)
	bits := make([]uint16, 1<<16)
	for i := range bits {
		bits[i] = uint16(i)
	}
	for _, dt := range []tensor.DType{tensor.F16, tensor.BF16} {
		W := tensor.NewHalf(len(bits), 1, dt, bits)
		want := make([]float32, len(bits))
		widenGeneric(want, bits, dt)
		for i := range want {
			var s float32 // a dot product's sum starts at +0: −0 comes out +0
			want[i] = s + want[i]
		}
		got := make([]float32, len(bits))
		require.True(t, simdRowsDot(W, 0, len(bits), []float32{1}, got))
		for i := range bits {
			if math.IsNaN(float64(want[i])) {
				require.True(t, math.IsNaN(float64(got[i])), "%v %#04x: got %v, want NaN", dt, i, got[i])
				continue
			}
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%v %#04x: got %v, want %v", dt, i, got[i], want[i])
		}
	}
}

// TestSIMD128RowsDotSplitsAndTails runs rowsDot through the module for
// lengths around its 16-column step and row ranges cut anywhere, against
// float64 sums (TestRowsDotMatchesGeneric covers 0..100 columns too).
func TestSIMD128RowsDotSplitsAndTails(t *testing.T) {
	requireSIMD128(t)
	r := rand.New(rand.NewPCG(31, 32))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8} {
		for _, in := range []int{1, 15, 16, 17, 31, 32, 33, 255, 256, 257, 1023} {
			rows := 5
			W, wf := randMat(r, rows, in, dt)
			x := randVec(r, in, 1)
			out := make([]float32, rows)
			require.True(t, simdRowsDot(W, 0, rows, x, out), "%v in=%d", dt, in)
			for o := range rows {
				var s float64
				for i := range in {
					s += float64(wf[o*in+i]) * float64(x[i])
				}
				tol := dotTol(wf[o*in:(o+1)*in], x) + 1e-6*float64(in)
				require.InDelta(t, s, out[o], tol, "%v in=%d o=%d", dt, in, o)
			}
			part := make([]float32, 2)
			require.True(t, simdRowsDot(W, 2, 4, x, part))
			require.Equal(t, out[2:4], part, "%v in=%d rows [2,4)", dt, in)
		}
	}
}

// TestSIMD128PrefillMatchesDecode: every token of a T-token product
// through the module's gemm tiles (four tokens per weight vector, leftover
// tokens one by one) gets exactly the bits of a one-token product, and
// Linear with T > 1 takes that path.
func TestSIMD128PrefillMatchesDecode(t *testing.T) {
	requireSIMD128(t)
	r := rand.New(rand.NewPCG(41, 42))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8} {
		for _, in := range []int{3, 16, 17, 64, 100} {
			for _, T := range []int{2, 4, 5, 9} {
				rows := 7
				W, _ := randMat(r, rows, in, dt)
				x := randVec(r, T*in, 1)
				out := make([]float32, T*rows)
				Linear(nil, out, x, T, W)
				for tok := range T {
					one := make([]float32, rows)
					require.True(t, simdRowsDot(W, 0, rows, x[tok*in:(tok+1)*in], one))
					require.Equal(t, one, out[tok*rows:(tok+1)*rows], "%v in=%d T=%d token %d", dt, in, T, tok)
				}
				part := make([]float32, T*rows)
				require.True(t, simdGemm(W, 2, 5, x, T, part, rows))
				for tok := range T {
					require.Equal(t, out[tok*rows+2:tok*rows+5], part[tok*rows+2:tok*rows+5], "%v in=%d T=%d rows [2,5) token %d", dt, in, T, tok)
				}
			}
		}
	}
}

// BenchmarkSIMD128Rows is one decode product of a 4096×256 matrix (k3-micro's
// LM head) per dtype.
func BenchmarkSIMD128Rows(b *testing.B) {
	r := rand.New(rand.NewPCG(51, 52))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8} {
		b.Run(dt.String(), func(b *testing.B) {
			W, _ := randMat(r, 4096, 256, dt)
			x := randVec(r, 256, 1)
			out := make([]float32, 4096)
			buf := make([]float32, 256)
			b.SetBytes(int64(4096 * 256))
			for b.Loop() {
				rowsDot(W, 0, 4096, x, out, buf)
			}
		})
	}
}

// TestSIMD128KDAStepMatchesGeneric: the module's KDA step gives the pure-Go
// step's bits (state and output) for head sizes around its 4-wide step.
func TestSIMD128KDAStepMatchesGeneric(t *testing.T) {
	requireSIMD128(t)
	r := rand.New(rand.NewPCG(61, 62))
	for _, dims := range [][2]int{{1, 4}, {3, 8}, {16, 16}, {64, 64}, {32, 128}} {
		dk, dv := dims[0], dims[1]
		S := randVec(r, dk*dv, 1)
		S2 := append([]float32(nil), S...)
		k, q, v := randVec(r, dk, 1), randVec(r, dk, 1), randVec(r, dv, 1)
		e := make([]float32, dk)
		for i := range e {
			e[i] = 0.5 + 0.5*r.Float32()
		}
		o, o2 := make([]float32, dv), make([]float32, dv)
		for step := range 3 {
			require.True(t, simdKDAStep(S, k, q, e, v, o, 0.7))
			kdaStepGeneric(S2, k, q, e, v, o2, 0.7)
			require.Equal(t, S2, S, "dk=%d dv=%d step %d: state", dk, dv, step)
			require.Equal(t, o2, o, "dk=%d dv=%d step %d: output", dk, dv, step)
		}
	}
	require.False(t, simdKDAStep(make([]float32, 6), make([]float32, 2), make([]float32, 2), make([]float32, 2), make([]float32, 3), make([]float32, 3), 1), "dv=3 is not the module's")
}

// TestSIMD128Int8MatchesGeneric: the module's integer kernels give the
// generic Go kernels' bits (q8Generic, one token at a time and paired as
// prefill pairs them) for every block format, one block to odd block
// counts (the odd last 32-value block stays out of both), row ranges cut
// anywhere, tokens from any first one; scales over the whole f16 range
// below 2 (subnormals and zeros included) and a token of zeros. Linear on
// the module then equals Linear on the generic kernels (decode and
// prefill, the odd last block included).
func TestSIMD128Int8MatchesGeneric(t *testing.T) {
	requireSIMD128(t)
	rng := rand.New(rand.NewPCG(31, 41))
	for _, dt := range int8Formats {
		kind := actKindOf(dt)
		counts := []int{1, 2, 3, 4, 7}
		if kind == act256 {
			counts = []int{1, 2, 3}
		}
		for _, blocks := range counts {
			cols := blocks * dt.BlockLen()
			for _, rows := range []int{1, 3, 4, 5, 9} {
				for _, wide := range []bool{false, true} {
					W, _ := randomBlocked(rng, dt, rows, cols)
					if wide {
						wideScales(rng, W)
					}
					for _, T := range []int{1, 2, 3, 5, 34} {
						name := fmt.Sprintf("%v/%dx%d/T%d/wide=%v", dt, rows, cols, T, wide)
						x := make([]float32, T*cols)
						for i := range x {
							x[i] = float32(rng.NormFloat64()) * float32(1+i%7)
						}
						if T > 2 {
							clear(x[cols : 2*cols])
						}
						var a actQ8
						a.quantize(kind, x, cols, T)
						want := make([]float32, T*rows)
						q8Generic(W, 0, rows, 1, &a, 0, T, want, rows)
						got := make([]float32, T*rows)
						require.True(t, simdQ8(W, 0, rows, &a, 0, T, got, rows), name)
						requireBits(t, want, got, name)
						if T > 1 {
							a.pairUp()
							paired := make([]float32, T*rows)
							q8Generic(W, 0, rows, 1, &a, 0, T, paired, rows)
							requireBits(t, paired, got, name+" paired")
						}
						// rows [lo, hi) of tokens [1, T) into a strided output
						if lo, hi := rows/3, rows-rows/4; T > 1 {
							part := make([]float32, (T-1)*(rows+2))
							require.True(t, simdQ8(W, lo, hi, &a, 1, T-1, part, rows+2), name)
							for u := range T - 1 {
								requireBits(t, want[(u+1)*rows+lo:(u+1)*rows+hi], part[u*(rows+2):u*(rows+2)+hi-lo], name+" part")
							}
						}
						lin, gen := make([]float32, T*rows), make([]float32, T*rows)
						withInt8Blocks(true, func() {
							Linear(nil, lin, x, T, W)
							withInt8Generic(func() { Linear(nil, gen, x, T, W) })
						})
						requireBits(t, gen, lin, name+" Linear")
					}
				}
			}
		}
	}
}

// wideScales sets every f16 scale of W (MXFP4: every E8M0 exponent) to a
// random value below 2: zeros, subnormals and normals.
func wideScales(rng *rand.Rand, W *tensor.Mat) {
	bb := W.DType.BlockBytes()
	var halves []int
	switch W.DType {
	case tensor.Q4K:
		halves = []int{0, 2}
	case tensor.Q6K:
		halves = []int{208}
	case tensor.MXFP4:
	default:
		halves = []int{0}
	}
	for b := 0; b < len(W.Q)/bb; b++ {
		blk := W.Q[b*bb : (b+1)*bb]
		if W.DType == tensor.MXFP4 {
			blk[0] = byte(rng.IntN(129))
		}
		for _, h := range halves {
			blk[h], blk[h+1] = byte(rng.Uint32()), byte(rng.Uint32())&0xbb
		}
	}
}

// requireBits requires got to hold want's float32 bit patterns.
func requireBits(t *testing.T, want, got []float32, name string) {
	t.Helper()
	require.Len(t, got, len(want), name)
	for i := range want {
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			t.Fatalf("%s: [%d] got %v (%#08x), want %v (%#08x)", name, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
		}
	}
}

// TestSIMD128RowKernelsExact: the module's row-block helpers of the
// chunked KDA give their generic forms' bits, over widths around the
// vector steps (tails included) and row counts from one.
func TestSIMD128RowKernelsExact(t *testing.T) {
	requireSIMD128(t)
	r := rand.New(rand.NewPCG(31, 43))
	for _, d := range []int{1, 3, 4, 7, 8, 9, 15, 16, 17, 64, 100, 256, 300} {
		for _, rows := range []int{1, 2, 5, 64, 300} {
			big := rows*d >= simdRowsMin // smaller blocks stay in Go
			name := fmt.Sprintf("d=%d rows=%d", d, rows)
			ld := d + r.IntN(3)
			R := randVec(r, rows*ld, 1)
			c := randVec(r, rows, 1)
			got := randVec(r, d, 1)
			want := append([]float32(nil), got...)
			if !simdAxpyRows(got, c, R, ld) {
				require.False(t, big, name)
				axpyRowsGeneric(got, c, R, ld)
			}
			axpyRowsGeneric(want, c, R, ld)
			requireBits(t, want, got, "axpyRows "+name)

			m1 := randVec(r, rows*d+d/2, 1)
			m2 := append([]float32(nil), m1...)
			v := randVec(r, d, 1)
			if !simdMulRows(m1, v) {
				require.False(t, big, name)
				mulRowsGeneric(m1, v)
			}
			mulRowsGeneric(m2, v)
			requireBits(t, m2, m1, "mulRows "+name)

			x := randVec(r, d, 1)
			o1, o2 := make([]float32, rows), make([]float32, rows)
			if !simdDotRows(o1, x, R, ld) {
				require.False(t, big, name)
				dotRowsGeneric(o1, x, R, ld)
			}
			dotRowsGeneric(o2, x, R, ld)
			requireBits(t, o2, o1, "dotRows "+name)
		}
	}
}
