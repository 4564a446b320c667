package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Float32 kernels for weights in ggml block formats (tensor.Q8_0, Q4_0,
// Q4K, Q5K, Q6K, MXFP4): activations stay float32, a row is dequantized
// exactly as ggml's reference dequantizer does (tensor.Dequantize) into
// float32 scratch and then multiplied with the float32 kernels, so a
// quantized matrix computes what its dequantized float32 copy computes.
// Where the integer kernels run (actq8.go: AVX-512 VNNI; Q4_0, Q5_0,
// Q4_K, Q6_K, MXFP4, Q8_0), Linear and LinearBatch take that path instead.

// blockRowDot is W[o,:]·x for a block-format W: Σ_i deq(W)[o,i]·x[i],
// with the SIMD kernel of W's format where there is one (fastBlockDot),
// else the row dequantized into buf (len ≥ W.Cols) first.
func blockRowDot(W *tensor.Mat, o int, x, buf []float32) float32 {
	if s, ok := fastBlockDot(W, o, x, buf); ok {
		return s
	}
	rb := W.DType.RowBytes(W.Cols)
	row := buf[:W.Cols]
	tensor.Dequantize(W.DType, row, W.Q[o*rb:(o+1)*rb])
	return dot(row, x[:W.Cols])
}

// blockRowsDot sets out[o−lo] = W[o,:]·x for lo ≤ o < hi (block formats).
func blockRowsDot(W *tensor.Mat, lo, hi int, x, out, buf []float32) {
	for o := lo; o < hi; o++ {
		out[o-lo] = blockRowDot(W, o, x, buf)
	}
}

// linearBlocked is Linear for a block-format W: out[t, o] = Σ_i x[t, i]·
// deq(W)[o, i]. Decode (T < gemmToks) streams row dot products; prefill
// dequantizes gemmRows rows at a time into scratch and runs the float32
// register tiles over all T tokens.
func linearBlocked(p *Pool, out, x []float32, T int, W *tensor.Mat) {
	j := &p.blocked
	// Scratch: gemmRows dequantized rows, then Cols/16 floats of scales.
	*j = blockedJob{out: out[:T*W.Rows], x: x[:T*W.Cols], T: T, W: W, scratch: p.rowScratch(gemmRows*W.Cols + W.Cols/16)}
	grain := 1 + 32768/max(1, W.Cols*T)
	if T >= gemmToks {
		grain = max(grain, gemmRows)
	}
	p.For(W.Rows, grain, j)
	*j = blockedJob{}
}

type blockedJob struct {
	out, x  []float32
	T       int
	W       *tensor.Mat
	scratch [][]float32
}

func (j *blockedJob) Run(w, lo, hi int) {
	in, outN, T, W := j.W.Cols, j.W.Rows, j.T, j.W
	buf := j.scratch[w]
	if T < gemmToks {
		for o := lo; o < hi; o++ {
			for t := 0; t < T; t++ {
				j.out[t*outN+o] = blockRowDot(W, o, j.x[t*in:(t+1)*in], buf)
			}
		}
		return
	}
	rb := W.DType.RowBytes(in)
	for o0 := lo; o0 < hi; o0 += gemmRows {
		nr := min(gemmRows, hi-o0)
		rows := buf[:nr*in]
		if !fastDequantRows(W, o0, nr, rows, buf[gemmRows*in:]) {
			tensor.Dequantize(W.DType, rows, W.Q[o0*rb:(o0+nr)*rb])
		}
		t0 := 0
		if nr == gemmRows {
			for ; t0+gemmToks <= T; t0 += gemmToks {
				gemmTile(rows, in, j.x[t0*in:], in, in, j.out[t0*outN+o0:], outN)
			}
		}
		for r := 0; r < nr; r++ {
			row := rows[r*in : (r+1)*in]
			for t := t0; t < T; t++ {
				j.out[t*outN+o0+r] = dot(row, j.x[t*in:(t+1)*in])
			}
		}
	}
}
