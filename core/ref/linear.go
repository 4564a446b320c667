package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Dot returns Σ_i a[i]·b[i] over len(a) elements with float32 accumulation
// in several partial sums (SIMD with fused multiply-add where available).
func Dot(a, b []float32) float32 { return dot(a, b) }

// Axpy computes y[i] += a·x[i].
func Axpy(a float32, x, y []float32) { axpy(a, x, y) }

// Tile sizes of the Linear micro-kernel: gemmRows weight rows × gemmToks
// tokens per call, each weight vector loaded once for gemmToks tokens.
const (
	gemmRows = 3
	gemmToks = 4
	// fusedHalfMaxT: below this many tokens, half weights are widened in
	// registers by the micro-kernel rather than into scratch rows.
	fusedHalfMaxT = 16
)

// Linear computes out[t, o] = Σ_i x[t, i]·W[o, i] for t < T, i.e.
// out = x·Wᵀ with x of shape [T, W.Cols] and out of shape [T, W.Rows]
// (PyTorch nn.Linear without bias). Work is split over output rows, so each
// weight row is read (and, for half types, widened) once for all T tokens:
// decode (T = 1) is a GEMV streaming the weights, prefill a GEMM computed
// in register tiles of 3 rows × 4 tokens.
func Linear(p *Pool, out, x []float32, T int, W *tensor.Mat) {
	p = poolOr(p)
	if k := intKind(W); k != 0 {
		linearQ8(p, out, x, T, W, k)
		return
	}
	j := &p.lin
	*j = linearJob{out: out[:T*W.Rows], x: x[:T*W.Cols], T: T, W: W}
	if W.DType != tensor.F32 {
		// Widened rows, then (block formats) W.Cols/16 floats of scales.
		j.scratch = p.rowScratch(scratchRows*W.Cols + W.Cols/16)
	}
	grain := 1 + 32768/max(1, W.Cols*T)
	if T >= gemmToks {
		grain = max(grain, gemmRows)
	}
	p.For(W.Rows, grain, j)
	*j = linearJob{}
}

type linearJob struct {
	out, x  []float32
	T       int
	W       *tensor.Mat
	scratch [][]float32
}

func (j *linearJob) Run(w, lo, hi int) {
	in, outN, T := j.W.Cols, j.W.Rows, j.T
	var buf []float32
	if j.scratch != nil {
		buf = j.scratch[w]
	}
	if T == 1 {
		rowsDot(j.W, lo, hi, j.x, j.out[lo:hi], buf)
		return
	}
	if useTiles(j.W) {
		j.runTiles(lo, hi, buf)
		return
	}
	if T < gemmToks {
		for o := lo; o < hi; o++ {
			for t := 0; t < T; t++ {
				j.out[t*outN+o] = rowDot(j.W, o, j.x[t*in:(t+1)*in], buf)
			}
		}
		return
	}
	// Widening in registers costs a shift or convert per weight vector per
	// tile; widening rows once into scratch wins when many tokens share it.
	if (j.W.DType == tensor.F16 || j.W.DType == tensor.BF16) && T < fusedHalfMaxT && fusedHalf() {
		j.runHalfFused(lo, hi, buf)
		return
	}
	for o0 := lo; o0 < hi; o0 += gemmRows {
		nr := min(gemmRows, hi-o0)
		var rows []float32
		switch j.W.DType {
		case tensor.F32:
			rows = j.W.F32[o0*in : (o0+nr)*in]
		case tensor.Q8:
			rows = buf[:nr*in]
			for r := 0; r < nr; r++ {
				widenQ8(rows[r*in:(r+1)*in], j.W.I8[(o0+r)*in:(o0+r+1)*in], j.W.Scale[o0+r])
			}
		default:
			rows = buf[:nr*in]
			widenRows(j.W, o0, nr, rows, buf[scratchRows*in:])
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

// runHalfFused is Run for half-precision weights with kernels that widen
// in registers, so weight rows are never written out as float32.
func (j *linearJob) runHalfFused(lo, hi int, buf []float32) {
	in, outN, T, dt := j.W.Cols, j.W.Rows, j.T, j.W.DType
	for o0 := lo; o0 < hi; o0 += gemmRows {
		nr := min(gemmRows, hi-o0)
		rows := j.W.U16[o0*in : (o0+nr)*in]
		t0 := 0
		if nr == gemmRows {
			for ; t0+gemmToks <= T; t0 += gemmToks {
				gemmTileHalf(rows, in, j.x[t0*in:], in, in, j.out[t0*outN+o0:], outN, dt)
			}
		}
		for r := 0; r < nr; r++ {
			row := rows[r*in : (r+1)*in]
			for t := t0; t < T; t++ {
				j.out[t*outN+o0+r] = dotHalf(row, j.x[t*in:(t+1)*in], dt, buf)
			}
		}
	}
}

// scratchRows is the most rows Linear widens into scratch at a time.
const scratchRows = max(gemmRows, tileRows)

// widenRows writes rows [o, o+n) of a half-precision or block-format W
// as float32 into dst (block formats: exactly tensor.Dequantize's values;
// sc: scale scratch of W.Cols/16 floats).
func widenRows(W *tensor.Mat, o, n int, dst, sc []float32) {
	in := W.Cols
	if !W.DType.Blocked() {
		widen(dst[:n*in], W.U16[o*in:(o+n)*in], W.DType)
		return
	}
	if !fastDequantRows(W, o, n, dst, sc) {
		rb := W.DType.RowBytes(in)
		tensor.Dequantize(W.DType, dst[:n*in], W.Q[o*rb:(o+n)*rb])
	}
}

// rowDot is W[o,:]·x with the streaming dot kernel of W's dtype (buf:
// scratch of W.Cols floats for kernels that widen into memory, and of
// W.Cols/16 more for block scales).
func rowDot(W *tensor.Mat, o int, x, buf []float32) float32 {
	in := W.Cols
	if W.DType.Blocked() {
		return blockRowDot(W, o, x, buf)
	}
	switch W.DType {
	case tensor.F32:
		return dot(W.F32[o*in:(o+1)*in], x)
	case tensor.Q8:
		return dotQ8(W.I8[o*in:(o+1)*in], W.Scale[o], x)
	default:
		return dotHalf(W.U16[o*in:(o+1)*in], x, W.DType, buf)
	}
}

// GEMV is one matrix-vector product of a LinearBatch: Out = W·X (Linear
// with T = 1; X has W.Cols values, Out W.Rows).
type GEMV struct {
	W      *tensor.Mat
	X, Out []float32
}

// LinearBatch computes every product in gs, as Linear with T = 1 would,
// in one parallel region: the rows of all the matrices are split over the
// workers as one range. A decode step's selected experts are many small
// GEMVs; batched they pay one synchronisation instead of one each, and
// every worker streams rows all the time.
func LinearBatch(p *Pool, gs []GEMV) {
	p = poolOr(p)
	rows, cols := 0, 1
	for _, g := range gs {
		rows += g.W.Rows
		cols = max(cols, g.W.Cols)
	}
	idx := p.quantizeBatch(gs) // before reading p.acts, which it may grow
	j := &p.batch
	*j = batchJob{gs: gs, scratch: p.rowScratch(cols), idx: idx, acts: p.acts, tails: p.tails}
	p.For(rows, 1+32768/cols, j)
	*j = batchJob{}
}

// quantizeBatch quantizes the input of each GEMV of gs with an integer
// path once per distinct (input, layout) and returns, per GEMV, its index
// in p.acts (−1: float32 path).
func (p *Pool) quantizeBatch(gs []GEMV) []int {
	idx := p.actIdx[:0]
	n := 0
	for _, g := range gs {
		k := intKind(g.W)
		if k == 0 {
			idx = append(idx, -1)
			continue
		}
		x := g.X[:g.W.Cols]
		i := 0
		for ; i < n; i++ {
			if a := &p.acts[i]; a.kind == k && a.n == len(x) && a.src == &x[0] {
				break
			}
		}
		if i == n {
			if n == len(p.acts) {
				p.acts = append(p.acts, actQ8{})
			}
			p.acts[n].quantize(k, x, len(x), 1)
			p.acts[n].src = &x[0]
			n++
		}
		idx = append(idx, i)
	}
	for i := range n {
		p.acts[i].src = nil
	}
	p.actIdx = idx
	return idx
}

type batchJob struct {
	gs      []GEMV
	scratch [][]float32
	idx     []int   // per GEMV: its input in acts, or −1
	acts    []actQ8 // quantized inputs (Pool.acts)
	tails   [][4]float32
}

func (j *batchJob) Run(w, lo, hi int) {
	base := 0
	for gi, g := range j.gs {
		n := g.W.Rows
		if a, b := max(lo, base), min(hi, base+n); a < b {
			if i := j.idx[gi]; i >= 0 {
				rowsDotQ8(g.W, a-base, b-base, &j.acts[i], 0, g.Out[a-base:b-base], &j.tails[w])
			} else {
				rowsDot(g.W, a-base, b-base, g.X, g.Out[a-base:b-base], j.scratch[w])
			}
		}
		base += n
		if base >= hi {
			return
		}
	}
}

// rowsDotGeneric writes out[o-lo] = W[o, :]·x for lo ≤ o < hi one row at a
// time (block formats through their own row kernels; buf: scratch of
// W.Cols floats, and of W.Cols/16 more for block scales).
func rowsDotGeneric(W *tensor.Mat, lo, hi int, x, out, buf []float32) {
	out = out[:hi-lo]
	for o := lo; o < hi; o++ {
		out[o-lo] = rowDot(W, o, x, buf)
	}
}
