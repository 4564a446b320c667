package ref

import (
	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// The generic integer kernels: the integer path where no SIMD kernel
// takes the format (every CPU but amd64 with AVX-512 VNNI or AVX2, the
// purego build, js/wasm without the SIMD128 module, which gives these
// kernels' bits). Each weight block's integers are decoded once
// (blockInts32, q4kInts, q6kInts) and multiplied with every token of the
// call in integer arithmetic (two prefill tokens per int64 product,
// dots16x2); each (row, token) then gets rowDotQ8's float32 operations in
// rowDotQ8's order, so rowDotQ8's bits.

// q8Generic sets s[u·lds + r] to rowDotQ8(W, o + r·ldwRows, a, t0+u, 0,
// a.kernelBlocks()) for r < nr ≤ lds and u < N (ldwRows 0: row o nr
// times).
func q8Generic(W *tensor.Mat, o, nr, ldwRows int, a *actQ8, t0, N int, s []float32, lds int) {
	s = s[:(N-1)*lds+nr]
	for u := range N {
		clear(s[u*lds : u*lds+nr])
	}
	rows := nr
	if ldwRows == 0 {
		rows = 1
	}
	rb := W.DType.RowBytes(W.Cols)
	for r := range rows {
		row := W.Q[(o+r*ldwRows)*rb : (o+r*ldwRows+1)*rb]
		switch W.DType {
		case tensor.Q4K:
			q4kGeneric(row, a, t0, N, s[r:], lds)
		case tensor.Q6K:
			q6kGeneric(row, a, t0, N, s[r:], lds)
		default:
			pairsGeneric(W.DType, row, a, t0, N, s[r:], lds)
		}
	}
	for r := 1; r < nr && ldwRows == 0; r++ {
		for u := range N {
			s[u*lds+r] = s[u*lds]
		}
	}
}

// dots16 sets out[g] = Σ_{j<16} w_{16g+j}·q_{16g+j} for g < len(out):
// one call per chunk of blocks and token, the sums written out (under
// js/wasm a call costs as much as tens of products, and a loop over j is
// twice as slow).
func dots16(w, q []int8, out []int32) {
	for g := range out {
		w, q := (*[16]int8)(w[16*g:]), (*[16]int8)(q[16*g:])
		out[g] = int32(w[0])*int32(q[0]) + int32(w[1])*int32(q[1]) + int32(w[2])*int32(q[2]) + int32(w[3])*int32(q[3]) +
			int32(w[4])*int32(q[4]) + int32(w[5])*int32(q[5]) + int32(w[6])*int32(q[6]) + int32(w[7])*int32(q[7]) +
			int32(w[8])*int32(q[8]) + int32(w[9])*int32(q[9]) + int32(w[10])*int32(q[10]) + int32(w[11])*int32(q[11]) +
			int32(w[12])*int32(q[12]) + int32(w[13])*int32(q[13]) + int32(w[14])*int32(q[14]) + int32(w[15])*int32(q[15])
	}
}

// dots16x2 is dots16 for two tokens at once, q2 their values paired
// (actQ8.pairUp): each product w·(q_a + q_b·2³²) holds both tokens'
// products; a group's sum is A + B·2³² with |A|, |B| < 2³¹, so A is its
// low 32 bits and B the rest.
func dots16x2(w []int8, q2 []int64, outA, outB []int32) {
	for g := range outA {
		w, q := (*[16]int8)(w[16*g:]), (*[16]int64)(q2[16*g:])
		s := int64(w[0])*q[0] + int64(w[1])*q[1] + int64(w[2])*q[2] + int64(w[3])*q[3] +
			int64(w[4])*q[4] + int64(w[5])*q[5] + int64(w[6])*q[6] + int64(w[7])*q[7] +
			int64(w[8])*q[8] + int64(w[9])*q[9] + int64(w[10])*q[10] + int64(w[11])*q[11] +
			int64(w[12])*q[12] + int64(w[13])*q[13] + int64(w[14])*q[14] + int64(w[15])*q[15]
		lo := int32(s)
		outA[g], outB[g] = lo, int32((s-int64(lo))>>32)
	}
}

// tokenDots sets g[i] (and, when it returns true, g2[i]) to the sums of
// 16 products of w with token t's values from offset off (and token t+1's):
// two tokens at once where a is paired, t is even and t+1 < end.
func tokenDots(a *actQ8, w []int8, t, end, off int, g, g2 []int32) bool {
	n, l := a.n, 16*len(g)
	if a.paired && t%2 == 0 && t+1 < end {
		k := t / 2
		dots16x2(w, a.q2[k*n+off:k*n+off+l], g, g2)
		return true
	}
	dots16(w, a.q[t*n+off:t*n+off+l], g)
	return false
}

// pairsGeneric adds rowDotQ8's terms of the pairs of 32-value blocks of
// row (Q4_0, Q5_0, MXFP4, Q8_0) for tokens t0 … t0+N−1 to s[u·ld], up to
// chunkPairs pairs at a time (one dots16 call per token and chunk); the
// weights of a pair are put in the activations' order b0[0:16] b1[0:16]
// b0[16:32] b1[16:32] (actQ8).
func pairsGeneric(dt tensor.DType, row []byte, a *actQ8, t0, N int, s []float32, ld int) {
	const chunkPairs = 8
	bb, nb := dt.BlockBytes(), a.blocks()
	var w [64 * chunkPairs]int8
	var sc [2 * chunkPairs]float32
	var gs [2][4 * chunkPairs]int32
	for p0 := 0; p0 < nb/2; p0 += chunkPairs {
		c := min(chunkPairs, nb/2-p0)
		for j := range c {
			b0, b1 := row[2*(p0+j)*bb:(2*(p0+j)+1)*bb], row[(2*(p0+j)+1)*bb:(2*(p0+j)+2)*bb]
			wp := w[64*j : 64*j+64]
			blockInts32(dt, b0, (*[16]int8)(wp[0:16]), (*[16]int8)(wp[32:48]))
			blockInts32(dt, b1, (*[16]int8)(wp[16:32]), (*[16]int8)(wp[48:64]))
			sc[2*j], sc[2*j+1] = blockScale32(dt, b0), blockScale32(dt, b1)
		}
		for u := 0; u < N; {
			k := 1
			if tokenDots(a, w[:64*c], t0+u, t0+N, 64*p0, gs[0][:4*c], gs[1][:4*c]) {
				k = 2
			}
			for i := range k {
				g, t := gs[i][:4*c], t0+u+i
				d := a.d[t*nb+2*p0 : t*nb+2*(p0+c)]
				for j := range c {
					s[(u+i)*ld] += sc[2*j] * d[2*j] * float32(g[4*j]+g[4*j+2])
					s[(u+i)*ld] += sc[2*j+1] * d[2*j+1] * float32(g[4*j+1]+g[4*j+3])
				}
			}
			u += k
		}
	}
}

// kChunk is the number of K-quant blocks the generic kernels decode per
// dots16 call and token.
const kChunk = 2

// q4kGeneric adds rowDotQ8's terms of the Q4_K blocks of row for tokens
// t0 … t0+N−1 to s[u·ld], kChunk blocks at a time, the sums of the
// activations per 32 values from their sums per 16 (actQ8.sums).
func q4kGeneric(row []byte, a *actQ8, t0, N int, s []float32, ld int) {
	nb := a.blocks()
	var v [256 * kChunk]int8
	var sc, mn [8 * kChunk]int32
	var d, dmin [kChunk]float32
	var gs [2][16 * kChunk]int32
	for b0 := 0; b0 < nb; b0 += kChunk {
		c := min(kChunk, nb-b0)
		for j := range c {
			blk := row[144*(b0+j) : 144*(b0+j)+144]
			q4kInts(blk, (*[256]int8)(v[256*j:]))
			for i := range 8 {
				s, m := tensor.ScaleMinK4(i, blk[4:16])
				sc[8*j+i], mn[8*j+i] = int32(s), int32(m)
			}
			d[j], dmin[j] = half.F16ToF32(uint16(blk[0])|uint16(blk[1])<<8), half.F16ToF32(uint16(blk[2])|uint16(blk[3])<<8)
		}
		for u := 0; u < N; {
			k := 1
			if tokenDots(a, v[:256*c], t0+u, t0+N, 256*b0, gs[0][:16*c], gs[1][:16*c]) {
				k = 2
			}
			for i := range k {
				t := t0 + u + i
				for j := range c {
					g := (*[16]int32)(gs[i][16*j:])
					bs := (*[16]int32)(a.sums[t*a.n/16+16*(b0+j):])
					var isum, imin int32
					for l := range 8 {
						isum += sc[8*j+l] * (g[2*l] + g[2*l+1])
						imin += mn[8*j+l] * (bs[2*l] + bs[2*l+1])
					}
					s[(u+i)*ld] += (d[j]*float32(isum) - dmin[j]*float32(imin)) * a.d[t*nb+b0+j]
				}
			}
			u += k
		}
	}
}

// q6kGeneric adds rowDotQ8's terms of the Q6_K blocks of row for tokens
// t0 … t0+N−1 to s[u·ld], kChunk blocks at a time: Σ_g sc_g·Σ_{i∈g}
// (v_i − 32)·q_i as Σ_g sc_g·(Σ v_i·q_i − 32·Σ q_i), the sums of q per 16
// values from actQ8.sums.
func q6kGeneric(row []byte, a *actQ8, t0, N int, s []float32, ld int) {
	nb := a.blocks()
	var v [256 * kChunk]int8
	var sc [16 * kChunk]int32
	var d [kChunk]float32
	var gs [2][16 * kChunk]int32
	for b0 := 0; b0 < nb; b0 += kChunk {
		c := min(kChunk, nb-b0)
		for j := range c {
			blk := row[210*(b0+j) : 210*(b0+j)+210]
			q6kInts(blk, (*[256]int8)(v[256*j:]))
			for i := range 16 {
				sc[16*j+i] = int32(int8(blk[192+i]))
			}
			d[j] = half.F16ToF32(uint16(blk[208]) | uint16(blk[209])<<8)
		}
		for u := 0; u < N; {
			k := 1
			if tokenDots(a, v[:256*c], t0+u, t0+N, 256*b0, gs[0][:16*c], gs[1][:16*c]) {
				k = 2
			}
			for i := range k {
				t := t0 + u + i
				for j := range c {
					g := (*[16]int32)(gs[i][16*j:])
					bs := (*[16]int32)(a.sums[t*a.n/16+16*(b0+j):])
					var isum int32
					for l := range 16 {
						isum += sc[16*j+l] * (g[l] - 32*bs[l])
					}
					s[(u+i)*ld] += d[j] * a.d[t*nb+b0+j] * float32(isum)
				}
			}
			u += k
		}
	}
}
