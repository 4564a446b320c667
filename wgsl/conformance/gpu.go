//go:build cgo || js

package conformance

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// TB is the part of testing.TB the cases use; Fatal must not return
// (testing's calls runtime.Goexit; Reporter panics and Run recovers).
type TB interface {
	Helper()
	Fatal(args ...any)
	Errorf(format string, args ...any)
}

// GPU bundles a device with must-style upload and readback for the cases;
// buffers it creates are freed by Release.
type GPU struct {
	t    TB
	D    *wgsl.Device
	bufs []*wgsl.Buffer
}

// NewGPU returns a GPU on d reporting to t.
func NewGPU(t TB, d *wgsl.Device) *GPU { return &GPU{t: t, D: d} }

// Check fails the case on a non-nil error.
func (g *GPU) Check(err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}

// Release frees every buffer the cases created through g.
func (g *GPU) Release() {
	for _, b := range g.bufs {
		b.Release()
	}
	g.bufs = nil
}

// Up uploads v and returns a view of it.
func (g *GPU) Up(v []float32) wgsl.View {
	g.t.Helper()
	b, err := g.D.UploadF32(v)
	if err != nil {
		g.t.Fatal(err)
	}
	g.bufs = append(g.bufs, b)
	return b.At(0)
}

// Zeros returns a view of n zeroed words.
func (g *GPU) Zeros(n int) wgsl.View {
	g.t.Helper()
	b, err := g.D.NewBuffer(max(n, 1))
	if err != nil {
		g.t.Fatal(err)
	}
	g.bufs = append(g.bufs, b)
	return b.At(0)
}

// Mat uploads a weight matrix.
func (g *GPU) Mat(m *tensor.Mat) *wgsl.Mat {
	g.t.Helper()
	w, err := g.D.UploadMat(m)
	if err != nil {
		g.t.Fatal(err)
	}
	g.bufs = append(g.bufs, w.Buffers()...)
	return w
}

// Read reads n floats back from v.
func (g *GPU) Read(v wgsl.View, n int) []float32 {
	g.t.Helper()
	out := make([]float32, n)
	if err := g.D.ReadF32(v, out); err != nil {
		g.t.Fatal(err)
	}
	return out
}

// RandVec returns n values in (−scale, scale).
func RandVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

// RandMat returns a rows×cols matrix of dt with values in (−scale, scale)
// (block formats: random blocks, see randBlocks).
func RandMat(r *rand.Rand, rows, cols int, dt tensor.DType, scale float32) *tensor.Mat {
	if dt.Blocked() {
		return randBlocks(r, rows, cols, dt, scale)
	}
	v := RandVec(r, rows*cols, scale)
	switch dt {
	case tensor.Q8:
		return tensor.Quantize(tensor.NewF32(rows, cols, v))
	case tensor.F16:
		u := make([]uint16, len(v))
		half.EncodeF16(u, v)
		return tensor.NewHalf(rows, cols, dt, u)
	case tensor.BF16:
		u := make([]uint16, len(v))
		half.EncodeBF16(u, v)
		return tensor.NewHalf(rows, cols, dt, u)
	}
	return tensor.NewF32(rows, cols, v)
}

// NMSE is Σ(got−want)² / Σwant² (or the plain Σ(got−want)² when want is 0);
// a NaN or ±Inf on either side — the GPU result or the CPU reference — or
// a length mismatch gives +Inf, so no bound passes it.
func NMSE(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) || math.IsNaN(w) || math.IsInf(w, 0) {
			return math.Inf(1)
		}
		num += (g - w) * (g - w)
		den += w * w
	}
	if den == 0 {
		return num
	}
	return num / den
}

// Rand is the case's deterministic random source (the same inputs on
// every platform).
func (c Case) Rand() *rand.Rand {
	return rand.New(rand.NewPCG(uint64(len(c.Shape)), uint64(len(c.Op))))
}

// Name is "op/dtype/shape".
func (c Case) Name() string { return c.Op + "/" + c.DType + "/" + c.Shape }

// Subset keeps the first perOp cases of every (op, dtype), the smallest
// shapes, so every kernel family and dtype is covered quickly.
func Subset(cs []Case, perOp int) []Case {
	seen := map[[2]string]int{}
	var out []Case
	for _, c := range cs {
		k := [2]string{c.Op, c.DType}
		if seen[k] < perOp {
			seen[k]++
			out = append(out, c)
		}
	}
	return out
}

// Result is one case run outside package testing.
type Result struct {
	Name  string  `json:"name"`
	Op    string  `json:"op"`
	DType string  `json:"dtype"`
	NMSE  float64 `json:"nmse"`
	Bound float64 `json:"bound"`
	OK    bool    `json:"ok"`
	Error string  `json:"error,omitempty"`
}

// reporter is a TB for running cases outside package testing.
type reporter struct{ errs []string }

type fatal struct{ msg string }

func (r *reporter) Helper()           {}
func (r *reporter) Fatal(args ...any) { panic(fatal{fmt.Sprint(args...)}) }
func (r *reporter) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

// Run runs c on d outside package testing (the browser). check, if not
// nil, is called after the case with the device's work done and returns
// an error the device reported meanwhile (WebGPU error scopes).
func Run(c Case, d *wgsl.Device, check func() error) (res Result) {
	res = Result{Name: c.Name(), Op: c.Op, DType: c.DType, Bound: c.Bound}
	rep := &reporter{}
	g := NewGPU(rep, d)
	defer g.Release()
	defer func() {
		if p := recover(); p != nil {
			f, ok := p.(fatal)
			if !ok {
				f.msg = fmt.Sprint("panic: ", p)
			}
			rep.errs = append(rep.errs, f.msg)
		}
		if check != nil {
			if err := check(); err != nil {
				rep.errs = append(rep.errs, err.Error())
			}
		}
		if len(rep.errs) > 0 {
			res.Error = errors.Join(toErrs(rep.errs)...).Error()
		}
		res.OK = res.Error == "" && res.NMSE <= res.Bound // false for NaN
	}()
	got, want := c.Run(g, c.Rand())
	res.NMSE = NMSE(got, want)
	if math.IsInf(res.NMSE, 0) {
		res.NMSE = math.MaxFloat64 // JSON has no Inf
	}
	return res
}

func toErrs(msgs []string) []error {
	out := make([]error, len(msgs))
	for i, m := range msgs {
		out[i] = errors.New(m)
	}
	return out
}

// randBlocks returns a rows×cols matrix of block dtype dt of random blocks:
// random quants, and scales (fp16 d, dmin; E8M0 e) drawn so that the
// values stay within about (−scale, scale).
func randBlocks(r *rand.Rand, rows, cols int, dt tensor.DType, scale float32) *tensor.Mat {
	bb := dt.BlockBytes()
	data := make([]byte, rows*dt.RowBytes(cols))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	f16 := func(b []byte, v float32) {
		var u [1]uint16
		half.EncodeF16(u[:], []float32{v})
		b[0], b[1] = byte(u[0]), byte(u[0]>>8)
	}
	d := func(max float32) float32 { return scale / max * (0.25 + 0.75*r.Float32()) }
	for blk := data; len(blk) > 0; blk = blk[bb:] {
		switch dt {
		case tensor.Q8_0:
			f16(blk, d(128))
		case tensor.Q4_0, tensor.Q4_1:
			f16(blk, d(8))
		case tensor.Q5_0, tensor.Q5_1:
			f16(blk, d(16))
		case tensor.MXFP4:
			blk[0] = byte(123 + r.IntN(2)) // 2^(e−128)·(doubled E2M1 ≤ 12)
		case tensor.Q4K:
			f16(blk, d(63*15))
			f16(blk[2:], d(63))
		case tensor.Q5K:
			f16(blk, d(63*31))
			f16(blk[2:], d(63))
		case tensor.Q6K:
			f16(blk[208:], d(128*32))
		}
	}
	m, err := tensor.NewBlocked(rows, cols, dt, data)
	if err != nil {
		panic(err) // cols not a whole number of blocks: a bad case
	}
	return m
}
