package ref

import (
	"fmt"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Integer block dot products: the activations of a product with a 4-, 5-,
// 6- or 8-bit block-format matrix are quantized to int8 once per token, and
// the packed weights are multiplied with them in integer arithmetic, the
// way ggml's vec_dot kernels do: Q4_K and Q6_K with 256-value activation
// blocks (ggml's Q8_K), Q4_0, Q5_0, MXFP4 and Q8_0 with 32-value blocks
// (ggml's Q8_0, with a float32 scale). The functions below are the
// definition of that path. Its kernels, like hash/crc32's, are one generic
// Go version (actq8_generic.go: pure Go, purego and js/wasm builds, amd64
// without AVX2; rowDotQ8's bits) and SIMD versions cross-checked against
// it (amd64: AVX-512 VNNI, and AVX2 kernels that give the VNNI kernels'
// bits; AMX tiles for prefill, quant_amx_amd64.go, with rowDotQ8's bits;
// js/wasm: the browser's SIMD128 module, simd_js.go, with the generic
// kernels' bits): all compute the same integer sums and differ only in the
// order of the float32 additions.
//
// The choice (int8Blocks): every product with these formats takes this
// path on every CPU — decode and prefill alike, so prefill gives each
// token decode's bits (but on AMX tiles, amxTakes: rowDotQ8's bits). It
// rounds the activations (relative error ≤ 1/254 of each block's largest
// value), as llama.cpp's kernels do: k3-micro's
// held-out perplexity stays within 0.6 % of llama.cpp's on every such
// file, with the SIMD kernels and with the generic ones alike
// (TestQuantizedPerplexityMatchesLlamaCpp requires 1 %).
// SetInt8Activations(false) switches it off: products then stay in float32
// (quant.go), exactly the dequantized matrix's.

// actKind is the block layout of quantized activations.
type actKind uint8

const (
	act32  actKind = iota + 1 // 32-value blocks (Q4_0, Q5_0, MXFP4, Q8_0 weights)
	act256                    // 256-value blocks (Q4_K, Q6_K weights)
)

// actKindOf is the activation layout the integer kernels of dt take, or 0
// when dt has none (its products stay in float32).
func actKindOf(dt tensor.DType) actKind {
	switch dt {
	case tensor.Q4_0, tensor.Q5_0, tensor.MXFP4, tensor.Q8_0:
		return act32
	case tensor.Q4K, tensor.Q6K:
		return act256
	}
	return 0
}

// actQ8 is T activation rows of n values quantized to int8 in blocks of
// 32 (act32) or 256 (act256): x ≈ d_b·q with d_b = max_{i∈b}|x_i|/127 and
// q = x·(127/max|x_i|) rounded to nearest even, |q| ≤ 127 (quantBlock).
// d holds the scales, q the values, m per token the kernels' metadata
// (metaWords uint32 per pair of 32-value blocks or per 256-value block).
//
// act32 rows are stored by pairs of blocks (b0, b1), 64 bytes each, in the
// order b0[0:16] b1[0:16] b0[16:32] b1[16:32] — the order a pair's packed
// nibbles unpack to — followed, when the row has an odd number of blocks,
// by the last block in its natural order. A pair's metadata is the 16
// float32 d0×4 d1×4 d0×4 d1×4 (the scale of each group of four int32
// lanes), then for each weight offset o of the kernels (8: Q4_0, 16: Q5_0
// and MXFP4, 128: Q8_0; they multiply unsigned values v + o) 16 float32:
// −o·Σq·d of the group of 16 bytes whose first lane it is, 0 in the other
// lanes.
//
// act256 rows are in natural order. A block's metadata is 32 int16 (eight
// zeros, the sums of q over each 32 values, then over each 16 values),
// then its scale as a float32, then zeros.
type actQ8 struct {
	kind actKind
	n, T int
	q    []int8
	d    []float32
	m    []uint32
	s16  []int32 // scratch: sums of q per 16 values of a token
	// sums holds each token's sums of q per 16 values (n/16 a token),
	// which the generic kernels read instead of the metadata.
	sums []int32
	// units is the number of kernel steps per token (pairs of 32-value
	// blocks, or 256-value blocks), lm the metadata words per token.
	units, lm int
	// src is the input row while LinearBatch looks for repeated inputs.
	src *float32
	// q2 holds, when paired (pairUp), the values of tokens 2k and 2k+1
	// as q_2k + q_2k+1·2³², k < T/2: the generic kernels' prefill takes
	// both tokens' products with one int64 product per weight.
	q2     []int64
	paired bool
	// xt and xu hold, when amx is set, the tokens laid out for the AMX
	// tiles (amxTiles, amxTiles32; amd64).
	xt  []int8
	xu  []float32
	amx bool
}

// metaWords is the size of the metadata of an act32 pair or an act256
// block.
func (a *actQ8) metaWords() int {
	if a.kind == act256 {
		return 32
	}
	return 64
}

// actOffsets are the weight offsets act32 metadata has corrections for.
var actOffsets = [3]int32{8, 16, 128}

// blocks is the number of quantization blocks per row.
func (a *actQ8) blocks() int {
	if a.kind == act256 {
		return a.n / 256
	}
	return a.n / 32
}

// metaUnits is the number of metadata records per token.
func (a *actQ8) metaUnits() int {
	if a.kind == act256 {
		return a.blocks()
	}
	return a.blocks() / 2
}

// meta is the metadata of pair or block u of token t.
func (a *actQ8) meta(t, u int) []uint32 {
	mw := a.metaWords()
	i := (t*a.metaUnits() + u) * mw
	return a.m[i : i+mw]
}

// quantize sets a to the T rows x[t·n : (t+1)·n] in layout kind (n a
// multiple of the block length), growing its storage as needed.
func (a *actQ8) quantize(kind actKind, x []float32, n, T int) {
	a.prepare(kind, n, T, 1)
	a.quantizeRows(x, 0, T, a.s16)
}

// prepare sizes a for T rows of n values in layout kind, with sums
// scratch for workers quantizing rows at once (quantizeRows).
func (a *actQ8) prepare(kind actKind, n, T, workers int) {
	a.kind, a.n, a.T = kind, n, T
	a.paired, a.amx = false, false
	bl := 32
	if kind == act256 {
		bl = 256
	}
	a.q = grow(a.q, T*n)
	a.d = grow(a.d, T*(n/bl))
	a.lm = a.metaUnits() * a.metaWords()
	a.units = a.metaUnits()
	a.m = grow(a.m, T*a.lm)
	a.s16 = grow(a.s16, workers*n/16)
	a.sums = grow(a.sums, T*n/16)
}

// quantizeRows quantizes rows [t0, t1) of x into a (sized by prepare);
// s16 is scratch of n/16 int32 private to the caller.
func (a *actQ8) quantizeRows(x []float32, t0, t1 int, s16 []int32) {
	kind, n := a.kind, a.n
	bl := 32
	if kind == act256 {
		bl = 256
	}
	nb := n / bl
	s16 = s16[:n/16]
	for t := t0; t < t1; t++ {
		xr, qr, dr := x[t*n:(t+1)*n], a.q[t*n:(t+1)*n], a.d[t*nb:(t+1)*nb]
		quantBlocks(xr, bl, qr, dr, s16)
		copy(a.sums[t*n/16:(t+1)*n/16], s16)
		if kind == act256 {
			for b := 0; b < nb; b++ {
				m, s := a.meta(t, b), s16[16*b:16*b+16]
				clear(m[:4])
				for j := range 4 {
					m[4+j] = uint32(uint16(s[4*j]+s[4*j+1])) | uint32(s[4*j+2]+s[4*j+3])<<16
				}
				for g := range 8 {
					m[8+g] = uint32(uint16(s[2*g])) | uint32(s[2*g+1])<<16
				}
				m[16] = math.Float32bits(dr[b])
				clear(m[17:])
			}
			continue
		}
		for p := 0; p < nb/2; p++ {
			// b0[16:32] and b1[0:16] trade places; lanes 4h and 8+4h of
			// the pair's vectors belong to block h.
			pq := qr[64*p : 64*p+64]
			var tmp [16]int8
			copy(tmp[:], pq[16:32])
			copy(pq[16:32], pq[32:48])
			copy(pq[32:48], tmp[:])
			m, s := a.meta(t, p), s16[4*p:4*p+4]
			clear(m[16:])
			for h := range 2 {
				d := math.Float32bits(dr[2*p+h])
				for g := range 4 {
					m[4*h+g], m[8+4*h+g] = d, d
				}
				for k, o := range actOffsets {
					m[16*(k+1)+4*h] = math.Float32bits(float32(-o*s[2*h]) * dr[2*p+h])
					m[16*(k+1)+8+4*h] = math.Float32bits(float32(-o*s[2*h+1]) * dr[2*p+h])
				}
			}
		}
	}
}

// pairUp fills q2 from the quantized values (after quantize or
// quantizeRows of every token).
func (a *actQ8) pairUp() {
	n := a.n
	a.q2 = grow(a.q2, a.T/2*n)
	for k := range a.T / 2 {
		qa, qb, p := a.q[2*k*n:(2*k+1)*n], a.q[(2*k+1)*n:(2*k+2)*n], a.q2[k*n:(k+1)*n]
		for i := range p {
			p[i] = int64(qa[i]) + int64(qb[i])<<32
		}
	}
	a.paired = true
}

// int16At is int16 number i of m.
func int16At(m []uint32, i int) int16 { return int16(m[i/2] >> (16 * uint(i%2))) }

func sum8(q []int8) int32 {
	var s int32
	for _, v := range q {
		s += int32(v)
	}
	return s
}

// quantBlocksGeneric sets d[b] = quantBlock(q[b·bl:], x[b·bl:]) for every
// block of bl values of x, and s16[i] to the sum of q[16i : 16i+16].
func quantBlocksGeneric(x []float32, bl int, q []int8, d []float32, s16 []int32) {
	nb := len(x) / bl
	for b := range nb {
		d[b] = quantBlock(q[b*bl:(b+1)*bl], x[b*bl:(b+1)*bl])
	}
	for i := range nb * bl / 16 {
		s16[i] = sum8(q[16*i : 16*i+16])
	}
}

// quantBlock writes q = x·(127/max|x|) rounded to nearest even (q = 0 when
// x is all zeros) and returns d = max|x|/127.
func quantBlock(q []int8, x []float32) float32 {
	var amax float32
	for _, v := range x {
		amax = max(amax, float32(math.Abs(float64(v))))
	}
	if amax == 0 {
		clear(q)
		return 0
	}
	id := 127 / amax
	for i, v := range x {
		q[i] = int8(math.RoundToEven(float64(v * id)))
	}
	return amax / 127
}

// e8m0Half is tensor.E8M0Half of every exponent byte (MXFP4 block scales).
var e8m0Half = func() (t [256]float32) {
	for e := range t {
		t[e] = tensor.E8M0Half(uint8(e))
	}
	return t
}()

// blockScale32 is the scale of a 32-value weight block (fp16 d, or the
// halved E8M0 scale of MXFP4, whose values are doubled).
func blockScale32(dt tensor.DType, blk []byte) float32 {
	if dt == tensor.MXFP4 {
		return e8m0Half[blk[0]]
	}
	return half.F16ToF32(uint16(blk[0]) | uint16(blk[1])<<8)
}

// blockInts32 sets lo and hi to the integer values 0-15 and 16-31 of a
// Q4_0, Q5_0, MXFP4 or Q8_0 weight block (deq = scale·v).
func blockInts32(dt tensor.DType, blk []byte, lo, hi *[16]int8) {
	switch dt {
	case tensor.Q8_0:
		b := (*[34]byte)(blk)
		for j := range 16 {
			lo[j], hi[j] = int8(b[2+j]), int8(b[18+j])
		}
	case tensor.Q4_0:
		b := (*[18]byte)(blk)
		for j := range 16 {
			lo[j], hi[j] = int8(b[2+j]&15)-8, int8(b[2+j]>>4)-8
		}
	case tensor.MXFP4:
		b := (*[17]byte)(blk)
		for j := range 16 {
			lo[j], hi[j] = lutMXFP4[b[1+j]&15], lutMXFP4[b[1+j]>>4]
		}
	case tensor.Q5_0:
		b := (*[22]byte)(blk)
		qh := uint32(b[2]) | uint32(b[3])<<8 | uint32(b[4])<<16 | uint32(b[5])<<24
		for j := range 16 {
			lo[j] = int8(b[6+j]&15|byte(qh>>j&1)<<4) - 16
			hi[j] = int8(b[6+j]>>4|byte(qh>>(j+16)&1)<<4) - 16
		}
	}
}

// q4kInts sets v to the unsigned 4-bit values of a Q4_K block (sub-block
// j: the low nibbles of qs[32·(j/2):] for even j, the high ones for odd).
func q4kInts(blk []byte, v *[256]int8) {
	for p := range 4 {
		qs := blk[16+32*p : 48+32*p]
		for l := range 32 {
			v[64*p+l], v[64*p+32+l] = int8(qs[l]&15), int8(qs[l]>>4)
		}
	}
}

// q6kInts sets v to the unsigned 6-bit values of a Q6_K block (ql's
// nibbles with two bits of qh above, in ggml's element order).
func q6kInts(blk []byte, v *[256]int8) {
	for n := range 2 {
		ql, qh := blk[64*n:], blk[128+32*n:]
		for l := range 32 {
			v[128*n+l] = int8(ql[l]&15 | (qh[l]&3)<<4)
			v[128*n+l+32] = int8(ql[l+32]&15 | (qh[l]>>2&3)<<4)
			v[128*n+l+64] = int8(ql[l]>>4 | (qh[l]>>4&3)<<4)
			v[128*n+l+96] = int8(ql[l+32]>>4 | (qh[l]>>6&3)<<4)
		}
	}
}

// lutMXFP4 is the doubled E2M1 value of each nibble (ggml's kvalues_mxfp4).
var lutMXFP4 = [16]int8{0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12}

// actBlock32 returns the int8 values of 32-value block b of token t of a
// (act32) in natural order.
func (a *actQ8) actBlock32(t, b int, q *[32]int8) {
	row := a.q[t*a.n : (t+1)*a.n]
	if p := b / 2; p < a.blocks()/2 {
		h := b % 2
		copy(q[:16], row[64*p+16*h:])
		copy(q[16:], row[64*p+32+16*h:])
		return
	}
	copy(q[:], row[32*b:])
}

// rowDotQ8 is the integer dot product of weight row o of W (Q4_0, Q5_0,
// MXFP4, Q8_0, Q4_K or Q6_K) with token t of a, over blocks [b0, b1):
//
//	32-value blocks: Σ_b (s_b·d_b)·float32(Σ_j v_bj·q_bj)
//	Q4_K: Σ_sb (d·float32(Σ_j sc_j·Σ_{i∈j} v_i·q_i) − dmin·float32(Σ_j m_j·Σ_{i∈j} q_i))·d_sb
//	Q6_K: Σ_sb (d·d_sb)·float32(Σ_g sc_g·Σ_{i∈g} (v_i − 32)·q_i)
//
// with s_b, v the weight block's scale and integer values, d_b the
// activation block's scale, for Q4_K d and dmin the super-block's scales,
// sc_j and m_j the 6-bit scale and min of 32-value sub-block j, for Q6_K sc_g the
// int8 scale of 16-value group g and v the unsigned 6-bit values.
func rowDotQ8(W *tensor.Mat, o int, a *actQ8, t, b0, b1 int) float32 {
	dt := W.DType
	rb := dt.RowBytes(W.Cols)
	row := W.Q[o*rb : (o+1)*rb]
	bb := dt.BlockBytes()
	var sum float32
	if dt == tensor.Q4K {
		q := a.q[t*a.n : (t+1)*a.n]
		nb := a.blocks()
		var v [256]int8
		for b := b0; b < b1; b++ {
			blk := row[b*bb : (b+1)*bb]
			q4kInts(blk, &v)
			d, dmin := half.F16ToF32(uint16(blk[0])|uint16(blk[1])<<8), half.F16ToF32(uint16(blk[2])|uint16(blk[3])<<8)
			var isum, imin int32
			for j := range 8 {
				sc, m := tensor.ScaleMinK4(j, blk[4:16])
				var dotj int32
				for l := 32 * j; l < 32*j+32; l++ {
					dotj += int32(v[l]) * int32(q[256*b+l])
				}
				isum += int32(sc) * dotj
				imin += int32(m) * sum8(q[256*b+32*j:256*b+32*j+32])
			}
			sum += (d*float32(isum) - dmin*float32(imin)) * a.d[t*nb+b]
		}
		return sum
	}
	if dt == tensor.Q6K {
		q := a.q[t*a.n : (t+1)*a.n]
		var v [256]int8
		for b := b0; b < b1; b++ {
			blk := row[b*bb : (b+1)*bb]
			q6kInts(blk, &v)
			var isum int32
			for g := range 16 {
				var dg int32
				for i := 16 * g; i < 16*g+16; i++ {
					dg += (int32(v[i]) - 32) * int32(q[256*b+i])
				}
				isum += int32(int8(blk[192+g])) * dg
			}
			d := half.F16ToF32(uint16(blk[208]) | uint16(blk[209])<<8)
			sum += d * a.d[t*a.blocks()+b] * float32(isum)
		}
		return sum
	}
	var v [32]int8
	var q [32]int8
	nb := a.blocks()
	for b := b0; b < b1; b++ {
		blk := row[b*bb : (b+1)*bb]
		blockInts32(dt, blk, (*[16]int8)(v[:16]), (*[16]int8)(v[16:]))
		a.actBlock32(t, b, &q)
		var s int32
		for j := range 32 {
			s += int32(v[j]) * int32(q[j])
		}
		sum += blockScale32(dt, blk) * a.d[t*nb+b] * float32(s)
	}
	return sum
}

// int8Blocks selects the integer path for every block format that has
// one (actKindOf), on every CPU: the SIMD kernels where the CPU has them
// (AVX-512 VNNI, AVX2), the generic ones (actq8_generic.go) elsewhere,
// all with rowDotQ8's integer sums, so a product's result does not depend
// on the CPU beyond the order of float32 additions (which the next
// product's int8 rounding can still turn into a different near-tied
// choice: exact products agree everywhere). SetInt8Activations(false) (engine's exact products, tests)
// switches it off: products then run in float32 on the dequantized
// weights.
var int8Blocks = true

// intKind is the activation layout of W's integer path, or 0 when W's
// product runs in float32.
func intKind(W *tensor.Mat) actKind {
	if !int8Blocks || W.Cols < 32 {
		return 0
	}
	return actKindOf(W.DType)
}

// SetInt8Activations switches the integer path on or off and returns the
// previous setting: off, block-format products run in float32 on the
// dequantized matrix, as the GPU backends compute them (slower, without
// the activations' rounding; engine.SetExact). On (the default), every
// CPU takes it, with its SIMD kernels or the generic ones. Not safe to
// call while a product runs.
func SetInt8Activations(on bool) (was bool) {
	was, int8Blocks = int8Blocks, on
	return was
}

// Int8Kernels lists the sets of integer-path kernels this build and CPU
// can run, fastest first: "amx" ("vnni" with AMX tiles for prefill),
// "vnni" (AVX-512 VNNI), "avx2" (amd64), "simd128" (js/wasm with the
// SIMD128 module, the generic kernels' bits), "go" (the generic kernels,
// everywhere). The default is the first.
func Int8Kernels() []string { return int8KernelSets() }

// SetInt8Kernels makes the integer path run the kernel set name (one of
// Int8Kernels) and returns the previous one. Every set computes the same
// integer sums; the sets differ only in the order of the float32
// additions (the AVX2 kernels give the VNNI ones' bits). Tests and
// benchmarks use it to compare them. Not safe to call while a product
// runs.
func SetInt8Kernels(name string) (prev string, err error) {
	prev = int8KernelSet()
	if !slices.Contains(int8KernelSets(), name) {
		return prev, fmt.Errorf("ref: integer kernels %q: this CPU has %v", name, int8KernelSets())
	}
	setInt8KernelSet(name)
	return prev, nil
}

// kernelBlocks is the number of blocks of a row the four-row kernels take:
// all of them, but an odd last 32-value block, which rowsDotQ8 adds with
// rowDotQ8.
func (a *actQ8) kernelBlocks() int {
	if a.kind == act256 {
		return a.blocks()
	}
	return a.blocks() &^ 1
}

// rowsDotQ8 sets out[o−lo] = rowDotQ8(W, o, a, t, 0, blocks) for
// lo ≤ o < hi with the four-row kernel (leftover rows run it on one row,
// into one: the calling worker's scratch, Pool.tails), so a row's result
// does not depend on lo and hi.
func rowsDotQ8(W *tensor.Mat, lo, hi int, a *actQ8, t int, out []float32, one *[4]float32) {
	out = out[:hi-lo]
	ng := (hi - lo) / 4
	if ng > 0 {
		gemv4Q8(W, lo, 1, ng, a, t, out[:4*ng])
	}
	for o := lo + 4*ng; o < hi; o++ {
		gemv4Q8(W, o, 0, 1, a, t, one[:])
		out[o-lo] = one[0]
	}
	addOddBlock(W, lo, hi, a, t, t+1, out[:hi-lo], 0)
}

// addOddBlock adds rowDotQ8 of the odd last 32-value block (which the
// kernels leave out, kernelBlocks) to out[(t−t0)·ldo + o−lo] for
// lo ≤ o < hi and t0 ≤ t < t1; nothing where there is none.
func addOddBlock(W *tensor.Mat, lo, hi int, a *actQ8, t0, t1 int, out []float32, ldo int) {
	nb, kb := a.blocks(), a.kernelBlocks()
	if kb == nb {
		return
	}
	for t := t0; t < t1; t++ {
		for o := lo; o < hi; o++ {
			out[(t-t0)*ldo+o-lo] += rowDotQ8(W, o, a, t, kb, nb)
		}
	}
}

// linearQ8 is Linear for a W with an integer path (kind): the T rows of x
// are quantized once, then each group of four weight rows runs against
// every token, with the sums decode gives each token.
func linearQ8(p *Pool, out, x []float32, T int, W *tensor.Mat, kind actKind) {
	a := &p.act
	if T < quantParallelT || p.n == 1 {
		a.quantize(kind, x[:T*W.Cols], W.Cols, T)
	} else {
		// A prefill piece's tokens are quantized in parallel too (the
		// same bits: each token on its own).
		a.prepare(kind, W.Cols, T, p.n)
		p.quant = quantJob{a: a, x: x[:T*W.Cols]}
		p.For(T, 4, &p.quant)
		p.quant = quantJob{}
	}
	if T > 1 && genericInt8(W.DType) {
		a.pairUp()
	}
	prepareTiles(W, a)
	j := &p.q8
	*j = q8Job{out: out[:T*W.Rows], a: a, W: W, tails: p.tails}
	grain := 1 + 32768/max(1, W.Cols*T)
	p.For(W.Rows, max(grain, 4), j)
	*j = q8Job{}
}

// prefillGeneric sets out[t·W.Rows + o] = rowDotQ8(W, o, a, t, 0,
// a.blocks()) for lo ≤ o < hi and every token t with the generic kernels:
// each row against genericTokens tokens at a time (their values stay in
// cache), its blocks decoded once.
func prefillGeneric(W *tensor.Mat, lo, hi int, a *actQ8, out []float32) {
	N := W.Rows
	for t0 := 0; t0 < a.T; t0 += genericTokens {
		n := min(genericTokens, a.T-t0)
		for o := lo; o < hi; o++ {
			q8Generic(W, o, 1, 1, a, t0, n, out[t0*N+o:], N)
			addOddBlock(W, o, o+1, a, t0, t0+n, out[t0*N+o:], N)
		}
	}
}

// genericTokens is the most tokens the generic kernels take per call in
// prefill (even: tokens stay paired, pairUp).
const genericTokens = 32

// quantParallelT is the fewest tokens linearQ8 quantizes in parallel.
const quantParallelT = 8

// quantJob quantizes the tokens of a prefill piece (actQ8.quantizeRows),
// each worker with its own slice of the sums scratch.
type quantJob struct {
	a *actQ8
	x []float32
}

func (j *quantJob) Run(w, lo, hi int) {
	s := j.a.n / 16
	j.a.quantizeRows(j.x, lo, hi, j.a.s16[w*s:(w+1)*s])
}

type q8Job struct {
	out   []float32
	a     *actQ8
	W     *tensor.Mat
	tails [][4]float32 // Pool.tails
}

func (j *q8Job) Run(w, lo, hi int) {
	if j.a.T == 1 {
		rowsDotQ8(j.W, lo, hi, j.a, 0, j.out[lo:hi], &j.tails[w])
		return
	}
	prefillQ8(j.W, lo, hi, j.a, j.out)
}
