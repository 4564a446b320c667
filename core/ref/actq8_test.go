package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// withInt8Blocks runs f with the integer block path switched on or off.
func withInt8Blocks(on bool, f func()) {
	old := int8Blocks
	int8Blocks = on
	defer func() { int8Blocks = old }()
	f()
}

// TestQuantizeAct: every value comes back within half a step of its
// block's scale, in the documented layouts, with the documented sums.
func TestQuantizeAct(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 6))
	for _, tc := range []struct {
		kind actKind
		n    int
	}{{act32, 32}, {act32, 64}, {act32, 96}, {act32, 352}, {act256, 256}, {act256, 768}} {
		const T = 3
		x := make([]float32, T*tc.n)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * float32(1+i%7)
		}
		copy(x[tc.n:2*tc.n], make([]float32, tc.n)) // an all-zero token
		var a actQ8
		a.quantize(tc.kind, x, tc.n, T)
		bl := tc.n / a.blocks()
		for tt := range T {
			for b := range a.blocks() {
				d := a.d[tt*a.blocks()+b]
				var q [256]int8
				if tc.kind == act32 {
					a.actBlock32(tt, b, (*[32]int8)(q[:32]))
				} else {
					copy(q[:], a.q[tt*tc.n+256*b:])
				}
				for i := range bl {
					v := x[tt*tc.n+b*bl+i]
					require.LessOrEqual(t, math.Abs(float64(d*float32(q[i])-v)), float64(d)/2*1.0001+1e-30,
						"%v n=%d token %d block %d value %d", tc.kind, tc.n, tt, b, i)
				}
				if tc.kind == act256 {
					m := a.meta(tt, b)
					for j := range 8 {
						require.Zero(t, int16At(m, j))
						require.Equal(t, int16(sum8(q[32*j:32*j+32])), int16At(m, 8+j))
					}
					for g := range 16 {
						require.Equal(t, int16(sum8(q[16*g:16*g+16])), int16At(m, 16+g))
					}
					require.Equal(t, d, math.Float32frombits(m[16]))
				} else if p := b / 2; p < a.blocks()/2 {
					h := b % 2
					m := a.meta(tt, p)
					require.Equal(t, d, math.Float32frombits(m[4*h]))
					require.Equal(t, d, math.Float32frombits(m[8+4*h+3]))
					for k, o := range actOffsets {
						require.Equal(t, float32(-o*sum8(q[:16]))*d, math.Float32frombits(m[16*(k+1)+4*h]))
						require.Equal(t, float32(-o*sum8(q[16:32]))*d, math.Float32frombits(m[16*(k+1)+8+4*h]))
						require.Zero(t, m[16*(k+1)+4*h+1])
					}
				}
			}
		}
	}
}

// TestQuantBlocksMatchGeneric: the SIMD quantizer (AVX-512, or the
// browser's SIMD128 module under js/wasm) gives quantBlock's bits.
func TestQuantBlocksMatchGeneric(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 9))
	for _, bl := range []int{32, 256} {
		x := make([]float32, 5*bl)
		for i := range x {
			x[i] = float32(rng.NormFloat64()) * float32(math.Pow(10, float64(i/bl-2)))
		}
		clear(x[bl : 2*bl])
		x[3*bl] = 127 // ties: 0.5, 1.5, … round to even
		for i := 1; i < 8; i++ {
			x[3*bl+i] = float32(i) + 0.5
		}
		q, d, s := make([]int8, len(x)), make([]float32, 5), make([]int32, len(x)/16)
		wq, wd, ws := make([]int8, len(x)), make([]float32, 5), make([]int32, len(x)/16)
		quantBlocks(x, bl, q, d, s)
		quantBlocksGeneric(x, bl, wq, wd, ws)
		require.Equal(t, wq, q, "bl %d", bl)
		require.Equal(t, wd, d, "bl %d", bl)
		require.Equal(t, ws, s, "bl %d", bl)
		require.Equal(t, sum8(wq[16:32]), ws[1])
		require.Equal(t, []int8{127, 2, 2, 4, 4, 6, 6, 8}, wq[3*bl:3*bl+8])
	}
}

// TestInt8KernelsMatchReference checks the four-row integer kernels
// (through rowsDotQ8 and Linear) against rowDotQ8 row by row, and the
// integer path against the float32 path within the activation rounding
// bound Σ|w_i|·d_b(i)/2, for every cut: row counts not a multiple of four,
// one to five blocks (odd 32-value block counts), one and several tokens
// (2×4 and 2×8 tiles and their remainders).
func TestInt8KernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 7))
	ran := 0
	for _, dt := range int8Formats {
		kind := actKindOf(dt)
		for _, blocks := range []int{1, 2, 3, 4, 5} {
			cols := blocks * dt.BlockLen()
			for _, rows := range []int{1, 3, 4, 5, 9} {
				W, F := randomBlocked(rng, dt, rows, cols)
				for _, T := range []int{1, 2, 3, 5, 8, 13} {
					name := fmt.Sprintf("%v/%dx%d/T%d", dt, rows, cols, T)
					x := make([]float32, T*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64())
					}
					var a actQ8
					a.quantize(kind, x, cols, T)
					got := make([]float32, T*rows)
					withInt8Blocks(true, func() { Linear(nil, got, x, T, W) })
					flt := make([]float32, T*rows)
					withInt8Blocks(false, func() { Linear(nil, flt, x, T, W) })
					for tt := range T {
						for o := range rows {
							want := rowDotQ8(W, o, &a, tt, 0, a.blocks())
							var mag, bound float64
							for i := range cols {
								w := math.Abs(float64(F.F32[o*cols+i]))
								mag += w * math.Abs(float64(x[tt*cols+i]))
								bound += w * float64(a.d[tt*a.blocks()+i/(cols/a.blocks())]) / 2
							}
							g := float64(got[tt*rows+o])
							require.InDelta(t, want, g, 2e-6*(1+mag), "%s: row %d token %d vs rowDotQ8", name, o, tt)
							require.InDelta(t, flt[tt*rows+o], g, bound*1.001+2e-6*(1+mag), "%s: row %d token %d vs float32", name, o, tt)
						}
					}
					if T == 1 {
						one := make([]float32, rows)
						withInt8Blocks(true, func() { LinearBatch(nil, []GEMV{{W: F, X: x, Out: flt}, {W: W, X: x, Out: one}}) })
						require.Equal(t, got, one, "%s: LinearBatch", name)
					}
					ran++
				}
			}
		}
	}
	require.NotZero(t, ran)
}

// int8Formats is every format with an integer path.
var int8Formats = []tensor.DType{tensor.Q4_0, tensor.Q5_0, tensor.MXFP4, tensor.Q8_0, tensor.Q4K, tensor.Q6K}

// TestInt8GenericMatchesRowDotQ8: the generic kernels give each (row,
// token) rowDotQ8's bits, for every format, one to seven blocks (odd
// 32-value block counts leave the last block to rowDotQ8), rows around the
// four-row groups and tokens around the tiles' and genericTokens'
// cut-offs, one token at a time and in pairs (pairUp, from an even or an
// odd first token); so does Linear on the generic path (withInt8Generic),
// the odd last block included.
func TestInt8GenericMatchesRowDotQ8(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 13))
	for _, dt := range int8Formats {
		kind := actKindOf(dt)
		for _, blocks := range []int{1, 2, 3, 4, 7} {
			cols := blocks * dt.BlockLen()
			for _, rows := range []int{1, 2, 3, 4, 5, 9} {
				W, _ := randomBlocked(rng, dt, rows, cols)
				for _, T := range []int{1, 2, 3, 4, 5, 7, 8, 9, 17, genericTokens + 3} {
					name := fmt.Sprintf("%v/%dx%d/T%d", dt, rows, cols, T)
					x := make([]float32, T*cols)
					for i := range x {
						x[i] = float32(rng.NormFloat64()) * float32(1+i%5)
					}
					var a actQ8
					a.quantize(kind, x, cols, T)
					kb := a.kernelBlocks()
					s := make([]float32, rows*T)
					q8Generic(W, 0, rows, 1, &a, 0, T, s, rows)
					one := make([]float32, 3*T)
					q8Generic(W, rows-1, 3, 0, &a, 0, T, one, 3)
					// Tokens paired (prefill), from an even and an odd one.
					a.pairUp()
					ps, odd := make([]float32, rows*T), make([]float32, rows*(T-1))
					q8Generic(W, 0, rows, 1, &a, 0, T, ps, rows)
					if T > 1 {
						q8Generic(W, 0, rows, 1, &a, 1, T-1, odd, rows)
					}
					got := make([]float32, T*rows)
					withInt8Generic(func() { Linear(nil, got, x, T, W) })
					for tt := range T {
						for o := range rows {
							want := rowDotQ8(W, o, &a, tt, 0, kb)
							require.Equal(t, want, s[tt*rows+o], "%s: row %d token %d", name, o, tt)
							require.Equal(t, want, ps[tt*rows+o], "%s: paired, row %d token %d", name, o, tt)
							if tt > 0 {
								require.Equal(t, want, odd[(tt-1)*rows+o], "%s: paired from token 1, row %d token %d", name, o, tt)
							}
							require.Equal(t, rowDotQ8(W, o, &a, tt, 0, a.blocks()), got[tt*rows+o], "%s: Linear row %d token %d", name, o, tt)
						}
						for r := range 3 {
							require.Equal(t, s[tt*rows+rows-1], one[3*tt+r], "%s: row %d repeated, token %d", name, rows-1, tt)
						}
					}
				}
			}
		}
	}
}

// TestInt8LinearTokensMatchDecode: a prefill of T tokens through the
// integer path (its activations quantized by one worker, or in parallel
// from quantParallelT tokens on) gives each token the bits of decoding it
// alone, for any number of workers — but on AMX tiles (amxTakes), which
// give rowDotQ8's bits, decode's within the float32 rounding.
func TestInt8LinearTokensMatchDecode(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 8))
	for _, workers := range []int{1, 2, 3} {
		p := NewPool(workers)
		defer p.Close()
		for _, dt := range int8Formats {
			rows, cols, T := 37, 3*dt.BlockLen(), 7+workers*quantParallelT
			kind := actKindOf(dt)
			W, F := randomBlocked(rng, dt, rows, cols)
			x := make([]float32, T*cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			withInt8Blocks(true, func() {
				all := make([]float32, T*rows)
				Linear(p, all, x, T, W)
				var a actQ8
				a.quantize(kind, x, cols, T)
				for tt := range T {
					one := make([]float32, rows)
					Linear(p, one, x[tt*cols:(tt+1)*cols], 1, W)
					if !amxTakes(W, T) {
						require.Equal(t, one, all[tt*rows:(tt+1)*rows], "%v token %d, %d workers", dt, tt, workers)
						continue
					}
					// AMX tiles: rowDotQ8's bits, decode's within rounding.
					for o := range rows {
						want := rowDotQ8(W, o, &a, tt, 0, a.blocks())
						require.Equal(t, want, all[tt*rows+o], "%v token %d row %d, %d workers: AMX", dt, tt, o, workers)
						var mag float64
						for i := range cols {
							mag += math.Abs(float64(F.F32[o*cols+i] * x[tt*cols+i]))
						}
						require.InDelta(t, one[o], want, 2e-6*(1+mag), "%v token %d row %d: AMX vs decode", dt, tt, o)
					}
				}
			})
		}
	}
}

// BenchmarkLinearBlocked times decode (T = 1) and a 16- and 64-token
// prefill of a 1024×1024 block-format matrix on the integer path, with each
// kernel set (Int8Kernels), and on the float32 path (bytes/s: weight bytes
// read).
func BenchmarkLinearBlocked(b *testing.B) {
	rng := rand.New(rand.NewPCG(15, 10))
	for _, dt := range []tensor.DType{tensor.Q4K, tensor.Q6K, tensor.MXFP4, tensor.Q4_0, tensor.Q8_0} {
		W, _ := randomBlocked(rng, dt, 1024, 1024)
		for _, T := range []int{1, 16, 64} {
			x := make([]float32, T*W.Cols)
			for i := range x {
				x[i] = float32(rng.NormFloat64())
			}
			out := make([]float32, T*W.Rows)
			for _, set := range append(Int8Kernels(), "float32") {
				b.Run(fmt.Sprintf("%v/T%d/%s", dt, T, set), func(b *testing.B) {
					p := NewPool(1)
					defer p.Close()
					if set != "float32" {
						prev, _ := SetInt8Kernels(set)
						defer SetInt8Kernels(prev)
					}
					withInt8Blocks(set != "float32", func() {
						b.SetBytes(int64(len(W.Q)))
						for b.Loop() {
							Linear(p, out, x, T, W)
						}
					})
				})
			}
		}
	}
}

// TestLinearBatchMixedFormats: a LinearBatch of products in several
// formats, some sharing an input (quantized once per layout), gives each
// product Linear's bits.
func TestLinearBatchMixedFormats(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 11))
	p := NewPool(2)
	defer p.Close()
	x1, x2 := make([]float32, 512), make([]float32, 512)
	for i := range x1 {
		x1[i], x2[i] = float32(rng.NormFloat64()), float32(rng.NormFloat64())
	}
	var gs []GEMV
	for i, dt := range []tensor.DType{tensor.Q4K, tensor.MXFP4, tensor.Q6K, tensor.F32, tensor.Q8_0, tensor.Q4K, tensor.Q5_0} {
		rows := 3 + 2*i
		var W *tensor.Mat
		if dt == tensor.F32 {
			_, W = randomBlocked(rng, tensor.Q8_0, rows, 512)
		} else {
			W, _ = randomBlocked(rng, dt, rows, 512)
		}
		x := x1
		if i%3 == 2 {
			x = x2
		}
		gs = append(gs, GEMV{W: W, X: x, Out: make([]float32, rows)})
	}
	withInt8Blocks(true, func() {
		LinearBatch(p, gs)
		for i, g := range gs {
			want := make([]float32, g.W.Rows)
			Linear(p, want, g.X, 1, g.W)
			require.Equal(t, want, g.Out, "GEMV %d (%v)", i, g.W.DType)
		}
	})
}

// TestSetInt8Kernels: every set Int8Kernels lists can be selected (the
// default first), and an unknown name is refused naming the sets.
func TestSetInt8Kernels(t *testing.T) {
	sets := Int8Kernels()
	require.Contains(t, sets, "go")
	first, err := SetInt8Kernels(sets[0])
	require.NoError(t, err)
	require.Equal(t, sets[0], first, "the default is the fastest set")
	for _, name := range sets {
		_, err := SetInt8Kernels(name)
		require.NoError(t, err)
		prev, err := SetInt8Kernels(sets[0])
		require.NoError(t, err)
		require.Equal(t, name, prev)
	}
	_, err = SetInt8Kernels("sse2")
	require.ErrorContains(t, err, `"sse2"`)
	prev, _ := SetInt8Kernels(sets[0])
	require.Equal(t, sets[0], prev, "a refused name changes nothing")
}
