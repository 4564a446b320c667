//go:build cgo || js

package wgsl

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// loopBudget is the number of loop iterations one invocation may run:
// lavapipe silently stops an invocation after about 65,535 (webgpu.md §5c).
// Wrappers split work so kernels stay well below it.
const loopBudget = 32768

// Mat is a weight matrix on the GPU: Rows×Cols elements of DType, row r at
// word Off + r·Stride. F32 uses one word per element; F16 and BF16 pack two
// elements per word (element 2j in the low half), rows padded to a word.
//
// A matrix larger than one storage binding (128 MiB by default) is split
// by rows: Parts hold consecutive row ranges, each in its own buffer, and
// View is Parts[0]'s. Linear and Embed read split matrices; other kernels
// refuse them with an error naming the matrix.
type Mat struct {
	View
	Rows, Cols int
	DType      tensor.DType
	Stride     int
	Parts      []*Mat
}

// Buffers returns the buffers holding m (one per part).
func (m *Mat) Buffers() []*Buffer {
	if len(m.Parts) == 0 {
		return []*Buffer{m.Buf}
	}
	var bs []*Buffer
	for _, p := range m.Parts {
		bs = append(bs, p.Buf)
	}
	return bs
}

// matPartWords is the largest matrix part UploadMat puts in one buffer:
// one binding, lowered by tests to split small matrices.
var matPartWords = maxBindingWords

// MatWords is the number of words a Rows×Cols matrix of dt takes on the GPU.
func MatWords(rows, cols int, dt tensor.DType) int { return rows * matStride(cols, dt) }

func matStride(cols int, dt tensor.DType) int {
	if dt == tensor.F32 {
		return cols
	}
	return (cols + 1) / 2
}

// PackMat returns m's GPU words (see Mat).
func PackMat(m *tensor.Mat) []uint32 {
	st := matStride(m.Cols, m.DType)
	out := make([]uint32, m.Rows*st)
	if m.DType == tensor.F32 {
		for i, v := range m.F32 {
			out[i] = math.Float32bits(v)
		}
		return out
	}
	for r := 0; r < m.Rows; r++ {
		row := m.U16[r*m.Cols : (r+1)*m.Cols]
		for c, h := range row {
			out[r*st+c/2] |= uint32(h) << (16 * (c & 1))
		}
	}
	return out
}

// UploadMat copies a weight matrix (F32, F16 or BF16) into a new buffer, or
// into row-range parts when it is larger than one binding (see Mat).
// Half-precision matrices stay half precision on the GPU.
func (d *Device) UploadMat(m *tensor.Mat) (*Mat, error) {
	if m == nil || m.Rows <= 0 || m.Cols <= 0 {
		return nil, fmt.Errorf("wgsl: UploadMat: empty matrix")
	}
	m = gpuWeights(m)
	if m.DType > tensor.BF16 {
		return nil, fmt.Errorf("wgsl: UploadMat: unsupported dtype %v", m.DType)
	}
	st := matStride(m.Cols, m.DType)
	words := PackMat(m)
	upload := func(rows []uint32, n int) (*Mat, error) {
		b, err := d.UploadU32(rows)
		if err != nil {
			return nil, fmt.Errorf("wgsl: UploadMat %dx%d %v: %w", m.Rows, m.Cols, m.DType, err)
		}
		return &Mat{View: b.At(0), Rows: n, Cols: m.Cols, DType: m.DType, Stride: st}, nil
	}
	if len(words) <= matPartWords {
		return upload(words, m.Rows)
	}
	per := matPartWords / st
	if per == 0 {
		return nil, fmt.Errorf("wgsl: UploadMat: one row of %d %v columns exceeds a binding", m.Cols, m.DType)
	}
	w := &Mat{Rows: m.Rows, Cols: m.Cols, DType: m.DType, Stride: st}
	for r0 := 0; r0 < m.Rows; r0 += per {
		n := min(per, m.Rows-r0)
		p, err := upload(words[r0*st:(r0+n)*st], n)
		if err != nil {
			for _, q := range w.Parts {
				q.Buf.Release()
			}
			return nil, err
		}
		w.Parts = append(w.Parts, p)
	}
	w.View = w.Parts[0].View
	return w, nil
}

// gpuWeights returns m in a dtype the kernels read. There are no int8 or
// ggml block-format kernels yet: Q8 and block-format (GGUF Q4_K, MXFP4, …)
// weights are widened to f16 on upload (half the memory of f32; ≤ 2^-11
// relative error per weight).
func gpuWeights(m *tensor.Mat) *tensor.Mat {
	if m == nil || (m.DType != tensor.Q8 && !m.DType.Blocked()) {
		return m
	}
	u := make([]uint16, m.Rows*m.Cols)
	half.EncodeF16(u, m.Float32())
	return tensor.NewHalf(m.Rows, m.Cols, tensor.F16, u)
}

func (m *Mat) check(what string) error {
	if m == nil {
		return fmt.Errorf("wgsl: %s: nil matrix", what)
	}
	if len(m.Parts) > 0 {
		return fmt.Errorf("wgsl: %s: a %dx%d %v matrix split over %d bindings (only Linear and Embed read split matrices)",
			what, m.Rows, m.Cols, m.DType, len(m.Parts))
	}
	if m.Stride < matStride(m.Cols, m.DType) {
		return fmt.Errorf("wgsl: %s: row stride %d too small for %d %v columns", what, m.Stride, m.Cols, m.DType)
	}
	return m.View.check((m.Rows-1)*m.Stride+matStride(m.Cols, m.DType), what+" weights")
}

func rowsWords(rows, n, stride int) int {
	if rows <= 0 {
		return 0
	}
	return (rows-1)*stride + n
}

// Linear records out = x·Wᵀ for T tokens (x [T, W.Cols], out [T, W.Rows],
// rows contiguous): a GEMV for T = 1, a GEMM reading each weight row once
// per 8 tokens otherwise. Mirrors ref.Linear.
func (d *Device) Linear(out, x View, T int, W *Mat) error {
	if W == nil {
		return fmt.Errorf("wgsl: Linear: nil matrix")
	}
	return d.LinearStrided(out, W.Rows, x, W.Cols, T, W)
}

// LinearStrided is Linear with explicit row strides (in words) for x and out,
// e.g. to read the c_kv part of latent-cache rows.
func (d *Device) LinearStrided(out View, oStride int, x View, xStride, T int, W *Mat) error {
	return d.linear(out, oStride, x, xStride, T, W, false)
}

// LinearAccum records out += x·Wᵀ (LinearStrided adding into out): a
// residual add fused into a projection. x and out must not overlap.
func (d *Device) LinearAccum(out View, oStride int, x View, xStride, T int, W *Mat) error {
	if out.Buf == x.Buf && out.Buf != nil {
		return fmt.Errorf("wgsl: LinearAccum: x and out share a buffer")
	}
	return d.linear(out, oStride, x, xStride, T, W, true)
}

// KDAGateEpilogue describes the KDA log-decay gate (ref.KDAGate) applied
// to a projection's outputs as they are stored (LinearKDAGate): DtBias
// and ALog must be views of one buffer.
type KDAGateEpilogue struct {
	H, DK               int
	DtBias, ALog        View
	PerChannel, Bounded bool
	LowerBound          float32
}

// LinearKDAGate records g = KDAGate(x·Wᵀ) in one dispatch (the f_b
// projection of the KDA gate with the gate as its epilogue; W has H·DK
// rows), equal to Linear followed by KDAGate.
func (d *Device) LinearKDAGate(g, x View, T int, W *Mat, e KDAGateEpilogue) error {
	if W == nil || W.Rows != e.H*e.DK || e.H <= 0 || e.DK <= 0 {
		return fmt.Errorf("wgsl: LinearKDAGate: matrix for %d×%d gate channels", e.H, e.DK)
	}
	if e.DtBias.Buf == nil || e.DtBias.Buf != e.ALog.Buf {
		return fmt.Errorf("wgsl: LinearKDAGate: dt_bias and A_log must share a buffer")
	}
	nA := e.H
	if e.PerChannel {
		nA = e.H * e.DK
	}
	if err := e.DtBias.check(e.H*e.DK, "LinearKDAGate dt_bias"); err != nil {
		return err
	}
	if err := e.ALog.check(nA, "LinearKDAGate A_log"); err != nil {
		return err
	}
	return d.linearEpi(g, W.Rows, x, W.Cols, T, W, false, &linearEpilogue{gate: &e}, 0)
}

// LinearNormedAccum records out += RMSNorm(x; ν, eps)·Wᵀ for one token (a
// GEMV: the RMSNorm of x is taken inside the projection, which adds into
// out), equal to RMSNorm then LinearAccum; x is left as it is. nu (ν) has
// W.Cols values; x and out must not share a buffer.
func (d *Device) LinearNormedAccum(out View, x View, W *Mat, nu View, eps float32) error {
	if W == nil {
		return fmt.Errorf("wgsl: LinearNormedAccum: nil matrix")
	}
	if out.Buf == x.Buf && out.Buf != nil {
		return fmt.Errorf("wgsl: LinearNormedAccum: x and out share a buffer")
	}
	if err := nu.check(W.Cols, "LinearNormedAccum weight"); err != nil {
		return err
	}
	return d.linearEpi(out, W.Rows, x, W.Cols, 1, W, true, &linearEpilogue{nu: nu, eps: eps}, 0)
}

// maxGatedNormCols is the widest input LinearGatedNorm takes (its
// workgroup-memory copy of the normed input).
const maxGatedNormCols = 2048

// LinearGatedNorm records out (+)= RMSNormGated(x; g, ν, heads of dk,
// eps, act)·Wᵀ for one token in one GEMV (equal to RMSNormGated then
// Linear, or LinearAccum when accum): every workgroup normalises and gates
// x itself, in workgroup memory, so W.Cols ≤ 2048. x and g are left as
// they are; out must not share a buffer with x or g.
func (d *Device) LinearGatedNorm(out View, accum bool, x, g View, W *Mat, nu View, dk int, eps float32, act ref.GateAct) error {
	if W == nil || dk <= 0 || W.Cols%dk != 0 || W.Cols > maxGatedNormCols || dk > loopBudget/2 {
		return fmt.Errorf("wgsl: LinearGatedNorm: matrix %v for heads of %d (≤ %d inputs)", W != nil, dk, maxGatedNormCols)
	}
	if out.Buf != nil && (out.Buf == x.Buf || out.Buf == g.Buf) {
		return fmt.Errorf("wgsl: LinearGatedNorm: out shares a buffer with x or g")
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{x, W.Cols, "x"}, {g, W.Cols, "g"}, {nu, dk, "weight"}, {out, W.Rows, "out"}} {
		if err := c.v.check(c.words, "LinearGatedNorm "+c.name); err != nil {
			return err
		}
	}
	if len(W.Parts) > 0 {
		off := 0
		for _, p := range W.Parts {
			if err := d.LinearGatedNorm(View{out.Buf, out.Off + off}, accum, x, g, p, nu, dk, eps, act); err != nil {
				return err
			}
			off += p.Rows
		}
		return nil
	}
	if err := W.check("LinearGatedNorm"); err != nil {
		return err
	}
	k, err := d.kernel("linear.wgsl", "gemv_gnorm", 5)
	if err != nil {
		return err
	}
	mode := 1
	if act == ref.GateSiLU {
		mode = 2
	}
	p := params{}.u(W.Rows, W.Cols, 1, int(W.DType), W.Off, W.Stride, x.Off, W.Cols, out.Off, W.Rows, 1, b2i(accum)).
		u(0, 0, 1, 0, 0, 0, 0, 0).u(0, nu.Off).f(eps).u(g.Off, dk, mode)
	return d.dispatch(k, p, []*Buffer{W.Buf, x.Buf, out.Buf, nu.Buf, g.Buf}, (W.Rows+7)/8)
}

// linearEpilogue is what linear.wgsl does besides the product: the KDA gate
// on the outputs, or (GEMV only) an RMSNorm of the input with weight nu.
type linearEpilogue struct {
	gate *KDAGateEpilogue
	nu   View
	eps  float32
}

func (d *Device) linear(out View, oStride int, x View, xStride, T int, W *Mat, accum bool) error {
	return d.linearEpi(out, oStride, x, xStride, T, W, accum, nil, 0)
}

// linearEpi is linear with an optional epilogue; r0 is the first output
// row of W within the gate's channels (for split matrices).
func (d *Device) linearEpi(out View, oStride int, x View, xStride, T int, W *Mat, accum bool, e *linearEpilogue, r0 int) error {
	if W != nil && len(W.Parts) > 0 {
		off := 0
		for _, p := range W.Parts {
			if err := d.linearEpi(View{out.Buf, out.Off + off}, oStride, x, xStride, T, p, accum, e, r0+off); err != nil {
				return err
			}
			off += p.Rows
		}
		return nil
	}
	if err := W.check("Linear"); err != nil {
		return err
	}
	if T <= 0 {
		return nil
	}
	if xStride < W.Cols || oStride < W.Rows {
		return fmt.Errorf("wgsl: Linear: strides x %d, out %d for %dx%d", xStride, oStride, W.Rows, W.Cols)
	}
	if err := x.check(rowsWords(T, W.Cols, xStride), "Linear x"); err != nil {
		return err
	}
	if err := out.check(rowsWords(T, W.Rows, oStride), "Linear out"); err != nil {
		return err
	}
	if (W.Cols+1)/2/64*8 > loopBudget {
		return fmt.Errorf("wgsl: Linear: %d columns exceed the per-invocation loop budget", W.Cols)
	}
	entry := "main"
	if T == 1 {
		entry = "gemv"
	}
	k, err := d.kernel("linear.wgsl", entry, 5)
	if err != nil {
		return err
	}
	tiles := (T + 7) / 8
	p := params{}.u(W.Rows, W.Cols, T, int(W.DType), W.Off, W.Stride, x.Off, xStride, out.Off, oStride, tiles, b2i(accum))
	var eb *Buffer
	if e != nil && e.gate != nil {
		g := e.gate
		p = p.u(1, r0, g.DK, b2i(g.PerChannel), b2i(g.Bounded)).f(g.LowerBound).u(g.DtBias.Off, g.ALog.Off)
		eb = g.DtBias.Buf
	} else {
		p = p.u(0, 0, 1, 0, 0, 0, 0, 0)
	}
	if e != nil && e.nu.Buf != nil {
		if T != 1 {
			return fmt.Errorf("wgsl: Linear with an input RMSNorm: %d tokens (GEMV only)", T)
		}
		p = p.u(1, e.nu.Off).f(e.eps)
		eb = e.nu.Buf
	} else {
		p = p.u(0, 0, 0)
	}
	groups := W.Rows * tiles
	if T == 1 {
		groups = (W.Rows + 7) / 8 // gemv: 8 rows per workgroup
	}
	p = p.u(0, 1, 0)
	return d.dispatch(k, p, []*Buffer{W.Buf, x.Buf, out.Buf, eb, nil}, groups)
}

// RMSNorm records out = w ⊙ x / sqrt(mean(x²) + eps) for rows rows of n
// values (ref.RMSNorm). out may equal x.
func (d *Device) RMSNorm(out, x, w View, rows, n int, eps float32) error {
	return d.rmsnorm(out, x, x, w, rows, n, eps, 0)
}

// RMSNormGated records out = RMSNorm(x) ⊙ act(g) with act σ or SiLU
// (ref.RMSNormGated). out may equal x.
func (d *Device) RMSNormGated(out, x, g, w View, rows, n int, eps float32, act ref.GateAct) error {
	mode := 1
	if act == ref.GateSiLU {
		mode = 2
	}
	if err := g.check(rows*n, "RMSNormGated g"); err != nil {
		return err
	}
	return d.rmsnorm(out, x, g, w, rows, n, eps, mode)
}

func (d *Device) rmsnorm(out, x, g, w View, rows, n int, eps float32, mode int) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: RMSNorm: %d rows of %d", rows, n)
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{x, rows * n, "x"}, {w, n, "w"}, {out, rows * n, "out"}} {
		if err := c.v.check(c.words, "RMSNorm "+c.name); err != nil {
			return err
		}
	}
	k, err := d.kernel("norm.wgsl", "rmsnorm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, mode).f(eps, 1).u(x.Off, n, g.Off, n, w.Off, out.Off, n)
	gb := g.Buf
	if mode == 0 {
		gb = nil // unused: a placeholder binding
	}
	return d.dispatch(k, p, []*Buffer{x.Buf, gb, w.Buf, out.Buf}, rows)
}

// L2Norm records out = x / sqrt(Σx² + eps) · scale per row of d values
// (ref.L2Norm, which works in place: pass out = x).
func (d *Device) L2Norm(out, x View, rows, n int, eps, scale float32) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: L2Norm: %d rows of %d", rows, n)
	}
	if err := x.check(rows*n, "L2Norm x"); err != nil {
		return err
	}
	if err := out.check(rows*n, "L2Norm out"); err != nil {
		return err
	}
	k, err := d.kernel("norm.wgsl", "l2norm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, 0).f(eps, scale).u(x.Off, n, x.Off, n, x.Off, out.Off, n)
	return d.dispatch(k, p, []*Buffer{x.Buf, nil, nil, out.Buf}, rows) // l2norm reads no g or w
}

// Strided is a View whose rows are Stride words apart.
type Strided struct {
	View
	Stride int
}

// Rows returns v as a Strided view with rows stride words apart.
func (v View) Rows(stride int) Strided { return Strided{v, stride} }

func (s Strided) check(rows, n int, what string) error {
	if s.Stride < n {
		return fmt.Errorf("wgsl: %s: row stride %d < row length %d", what, s.Stride, n)
	}
	return s.View.check(rowsWords(rows, n, s.Stride), what)
}

// GLU records out = act(gate, up) (ref.Act.GLU: SiLU-GLU or SiTU-GLU) over
// rows×n elements; each operand has its own row stride, so gate and up may
// be the two halves of one fused projection.
func (d *Device) GLU(out, gate, up Strided, rows, n int, act ref.Act) error {
	mode := 0
	if act.SiTU {
		mode = 1
		if act.Beta == 0 {
			return fmt.Errorf("wgsl: GLU: SiTU with β = 0")
		}
	}
	return d.elementwise("glu", out, gate, up, rows, n, mode, 0, act.Beta, act.BetaLin)
}

// Add records out = x + a·y over n contiguous elements (residual add with
// a = 1). out may equal x or y.
func (d *Device) Add(out, x, y View, n int, a float32) error {
	return d.elementwise("add", out.Rows(n), x.Rows(n), y.Rows(n), 1, n, 0, a, 0, 0)
}

// Axpy records y += a·x over n elements (ref.Axpy).
func (d *Device) Axpy(a float32, x, y View, n int) error { return d.Add(y, y, x, n, a) }

// Copy records out = x over rows×n elements with row strides.
func (d *Device) Copy(out, x Strided, rows, n int) error {
	return d.elementwise("copy", out, x, x, rows, n, 0, 0, 0, 0)
}

func (d *Device) elementwise(entry string, out, x, y Strided, rows, n, mode int, a, beta, betaLin float32) error {
	if rows <= 0 || n <= 0 {
		return nil
	}
	if err := x.check(rows, n, entry+" x"); err != nil {
		return err
	}
	if err := y.check(rows, n, entry+" y"); err != nil {
		return err
	}
	if err := out.check(rows, n, entry+" out"); err != nil {
		return err
	}
	k, err := d.kernel("elementwise.wgsl", entry, 3)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, mode).f(a, beta, betaLin).u(x.Off, x.Stride, y.Off, y.Stride, out.Off, out.Stride)
	yb := y.Buf
	if entry == "copy" || mode == 3 {
		yb = nil // y unused: a placeholder binding
	}
	return d.dispatch(k, p, []*Buffer{x.Buf, yb, out.Buf}, (rows*n+255)/256)
}

// ShortConv records the short causal depthwise conv + SiLU with carried
// state (ref.ShortConv): x, out [T, C], w [C, K], state [K−1, C] updated in
// place. out must not overlap x or state. Long pieces are split into several
// dispatches (channels are independent, so state carries between them).
func (d *Device) ShortConv(out, x, w, state View, T, C, K int) error {
	if T <= 0 {
		return nil
	}
	if C <= 0 || K < 2 {
		return fmt.Errorf("wgsl: ShortConv: C %d, K %d", C, K)
	}
	if err := x.check(T*C, "ShortConv x"); err != nil {
		return err
	}
	if err := out.check(T*C, "ShortConv out"); err != nil {
		return err
	}
	if err := w.check(C*K, "ShortConv w"); err != nil {
		return err
	}
	if err := state.check((K-1)*C, "ShortConv state"); err != nil {
		return err
	}
	k, err := d.kernel("conv.wgsl", "main", 4)
	if err != nil {
		return err
	}
	step := max(1, loopBudget/(K+2)-K)
	for t0 := 0; t0 < T; t0 += step {
		n := min(step, T-t0)
		p := params{}.u(n, C, K, x.Off+t0*C, w.Off, state.Off, out.Off+t0*C)
		if err := d.dispatch(k, p, []*Buffer{x.Buf, w.Buf, state.Buf, out.Buf}, (C+63)/64); err != nil {
			return err
		}
	}
	return nil
}

// KDAPrep records, for one decoded token, the KDA inputs from its
// projections — the fused form of three ShortConv (T = 1), two L2Norm and a
// Sigmoid (kda_prep.wgsl): for j = q, k, v, out_j = SiLU(conv of [tail_j;
// x_j]) with the tail shifted; out_q, out_k L2-normalised per head of dk
// (eps), out_q also times qScale; β = σ(β) in place. x holds [q | k | v]
// (3·H·dk words) and β (H words) in the same buffer; w the conv weights
// [3, H·dk, K]; the tails are [K−1, H·dk] each, tails words apart from
// state; outputs are H·dk words each, outStep apart from out.
func (d *Device) KDAPrep(out View, outStep int, x, beta, w, state View, tails, H, dk, K int, qScale, eps float32) error {
	C := H * dk
	switch {
	case H <= 0 || dk <= 0 || K < 2:
		return fmt.Errorf("wgsl: KDAPrep: H %d, dk %d, K %d", H, dk, K)
	case beta.Buf != x.Buf:
		return fmt.Errorf("wgsl: KDAPrep: β must be in the projections' buffer")
	case outStep < C || tails < (K-1)*C:
		return fmt.Errorf("wgsl: KDAPrep: output step %d, tail step %d for %d channels", outStep, tails, C)
	}
	if err := x.check(3*C, "KDAPrep x"); err != nil {
		return err
	}
	if err := beta.check(H, "KDAPrep beta"); err != nil {
		return err
	}
	if err := w.check(3*C*K, "KDAPrep w"); err != nil {
		return err
	}
	if err := state.check(2*tails+(K-1)*C, "KDAPrep state"); err != nil {
		return err
	}
	if err := out.check(2*outStep+C, "KDAPrep out"); err != nil {
		return err
	}
	k, err := d.kernel("kda_prep.wgsl", "main", 4)
	if err != nil {
		return err
	}
	p := params{}.u(H, dk, K, x.Off, beta.Off, w.Off, state.Off, tails, out.Off, outStep).f(qScale, eps)
	return d.dispatch(k, p, []*Buffer{x.Buf, w.Buf, state.Buf, out.Buf}, 3*H)
}

// KDAGate records the KDA log-decay gate (ref.KDAGate) for T tokens: g, raw
// [T, H·dk], dtBias [H·dk], aLog [H] or [H·dk] (perChannel). g may equal raw.
func (d *Device) KDAGate(g, raw, dtBias, aLog View, T, H, dk int, perChannel, bounded bool, lowerBound float32) error {
	n := T * H * dk
	if n <= 0 {
		return fmt.Errorf("wgsl: KDAGate: T %d, H %d, dk %d", T, H, dk)
	}
	nA := H
	if perChannel {
		nA = H * dk
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{g, n, "g"}, {raw, n, "raw"}, {dtBias, H * dk, "dt_bias"}, {aLog, nA, "A_log"}} {
		if err := c.v.check(c.words, "KDAGate "+c.name); err != nil {
			return err
		}
	}
	k, err := d.kernel("kda_gate.wgsl", "main", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, H*dk, dk, b2i(perChannel), b2i(bounded)).f(lowerBound).u(raw.Off, dtBias.Off, aLog.Off, g.Off)
	return d.dispatch(k, p, []*Buffer{raw.Buf, dtBias.Buf, aLog.Buf, g.Buf}, (n+255)/256)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// KDAArgs are the GPU operands of a KDA recurrence, laid out as in
// ref.KDAArgs: Q, K, G [T, H·DK], V, O [T, H·DV], Beta [T, H], S [H, DK, DV]
// (updated in place).
type KDAArgs struct {
	T, H, DK, DV           int
	Q, K, V, G, Beta, O, S View
}

// KDARecurrent records the KDA delta-rule recurrence token by token
// (ref.KDARecurrent) with one invocation per (head, value column). Many
// tokens (prefill through the recurrent form) are split into dispatches of
// at most loopBudget/(2·DK) tokens, each continuing from the state the
// previous one wrote.
func (d *Device) KDARecurrent(a *KDAArgs) error {
	if a == nil || a.T <= 0 || a.H <= 0 || a.DK <= 0 || a.DV <= 0 {
		return fmt.Errorf("wgsl: KDARecurrent: bad sizes %+v", a)
	}
	T, H, dk, dv := a.T, a.H, a.DK, a.DV
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{a.Q, T * H * dk, "Q"}, {a.K, T * H * dk, "K"}, {a.G, T * H * dk, "G"}, {a.V, T * H * dv, "V"},
		{a.O, T * H * dv, "O"}, {a.Beta, T * H, "Beta"}, {a.S, H * dk * dv, "S"}} {
		if err := c.v.check(c.words, "KDARecurrent "+c.name); err != nil {
			return err
		}
	}
	if H > maxGroups {
		return fmt.Errorf("wgsl: KDARecurrent: %d heads", H)
	}
	k, err := d.kernel("kda.wgsl", "main", 7)
	if err != nil {
		return err
	}
	step := max(1, loopBudget/(2*dk+2))
	bufs := []*Buffer{a.Q.Buf, a.K.Buf, a.V.Buf, a.G.Buf, a.Beta.Buf, a.O.Buf, a.S.Buf}
	for t0 := 0; t0 < T; t0 += step {
		n := min(step, T-t0)
		p := params{}.u(n, H, dk, dv, a.Q.Off+t0*H*dk, a.K.Off+t0*H*dk, a.V.Off+t0*H*dv, a.G.Off+t0*H*dk,
			a.Beta.Off+t0*H, a.O.Off+t0*H*dv, a.S.Off)
		if err := d.dispatchXY(k, p, bufs, (dv+63)/64, H); err != nil {
			return err
		}
	}
	return nil
}

// dispatchXY is dispatch with an explicit 2-D grid (gx ≤ 65535, gy ≤ 65535).
func (d *Device) dispatchXY(k *kernel, p params, bufs []*Buffer, gx, gy int) error {
	if gx > maxGroups || gy > maxGroups {
		return fmt.Errorf("wgsl: %s: grid %dx%d", k.name, gx, gy)
	}
	return d.dispatchGrid(k, p, bufs, uint32(gx), uint32(gy))
}
