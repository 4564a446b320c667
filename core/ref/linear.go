package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Dot returns Σ_i a[i]·b[i] over len(a) elements with float32 accumulation
// in four partial sums.
func Dot(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+8 <= n; i += 8 {
		s0 += a[i]*b[i] + a[i+4]*b[i+4]
		s1 += a[i+1]*b[i+1] + a[i+5]*b[i+5]
		s2 += a[i+2]*b[i+2] + a[i+6]*b[i+6]
		s3 += a[i+3]*b[i+3] + a[i+7]*b[i+7]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

// Axpy computes y[i] += a·x[i].
func Axpy(a float32, x, y []float32) {
	y = y[:len(x)]
	for i, v := range x {
		y[i] += a * v
	}
}

// Linear computes out[t, o] = Σ_i x[t, i]·W[o, i] for t < T, i.e.
// out = x·Wᵀ with x of shape [T, W.Cols] and out of shape [T, W.Rows]
// (PyTorch nn.Linear without bias). Work is split over output rows, so each
// weight row is read (and, for half types, widened) once for all T tokens:
// decode (T = 1) is a GEMV streaming the weights, prefill a GEMM.
func Linear(p *Pool, out, x []float32, T int, W *tensor.Mat) {
	p = poolOr(p)
	j := &p.lin
	*j = linearJob{out: out[:T*W.Rows], x: x[:T*W.Cols], T: T, W: W}
	if W.DType != tensor.F32 {
		j.scratch = p.rowScratch(W.Cols)
	}
	grain := 1 + 32768/max(1, W.Cols*T)
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
	in, outN := j.W.Cols, j.W.Rows
	var buf []float32
	if j.scratch != nil {
		buf = j.scratch[w]
	}
	for o := lo; o < hi; o++ {
		row := j.W.Row(o, buf)
		for t := 0; t < j.T; t++ {
			j.out[t*outN+o] = Dot(row, j.x[t*in:(t+1)*in])
		}
	}
}
