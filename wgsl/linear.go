//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Op wrappers of linear.wgsl.

// Mat is a weight matrix on the GPU: Rows×Cols elements of DType, row r at
// word Off + r·Stride. F32 uses one word per element; F16 and BF16 pack two
// elements per word (element 2j in the low half), rows padded to a word.
// The ggml block formats the kernels read (BlockFormat) keep their blocks:
// a row is its blocks' bodies (each block's bytes less its scale, a whole
// number of words), then the blocks' scales packed (two f16 or four E8M0
// per word), rows padded to a word — the file's bytes, rearranged. Q8
// (int8 with a float32 scale per row) keeps its bytes too: a row is its
// int8 values, then its scale.
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

// MatWords is the number of words a Rows×Cols matrix of dt takes on the GPU
// (dt as uploaded: see GPUDType).
func MatWords(rows, cols int, dt tensor.DType) int { return rows * matStride(cols, dt) }

func matStride(cols int, dt tensor.DType) int {
	if dt == tensor.Q8 {
		return (cols+3)/4 + 1
	}
	if scale, ok := blockScale(dt); ok {
		nb := cols / dt.BlockLen()
		return nb*(dt.BlockBytes()-scale[1])/4 + (nb*scale[1]+3)/4
	}
	if dt == tensor.F32 {
		return cols
	}
	return (cols + 1) / 2
}

// blockScale is where the scale of a block of dt sits within its bytes
// ({offset, length}) for the block formats the kernels read as they are
// (common.wgsl's qvals); ok is false for every other dtype. The rest of the
// block is its body.
func blockScale(dt tensor.DType) (scale [2]int, ok bool) {
	switch dt {
	case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0:
		return [2]int{0, 2}, true // fp16 d first
	case tensor.MXFP4:
		return [2]int{0, 1}, true // E8M0 e first
	case tensor.Q6K:
		return [2]int{208, 2}, true // fp16 d last
	case tensor.Q4K, tensor.Q5K:
		return [2]int{0, 0}, true // whole words, kept whole
	}
	return scale, false
}

// BlockFormat reports whether the GPU kernels read dt's blocks as they
// are, 32 values (a unit) at a time: Q8_0, Q4_0, Q5_0, Q4_K, Q5_K, Q6_K,
// MXFP4, and Q8 in rows of whole units; the other block formats are
// widened to F16 on upload.
func BlockFormat(dt tensor.DType) bool {
	_, ok := blockScale(dt)
	return ok || dt == tensor.Q8
}

// GPUDType is the dtype a matrix of dt has on the GPU (see gpuWeights),
// for Q8 when its rows are whole 32-value units (gpuDType).
func GPUDType(dt tensor.DType) tensor.DType {
	if dt.Blocked() && !BlockFormat(dt) {
		return tensor.F16
	}
	return dt
}

// gpuDType is the dtype m has on the GPU: GPUDType, and F16 for a Q8
// matrix whose rows are not whole units of 32.
func gpuDType(m *tensor.Mat) tensor.DType {
	if m.DType == tensor.Q8 && m.Cols%32 != 0 {
		return tensor.F16
	}
	return GPUDType(m.DType)
}

// PackMat returns m's GPU words (see Mat).
func PackMat(m *tensor.Mat) []uint32 { return appendPackMat(nil, m) }

// appendPackMat appends m's GPU words (PackMat) to dst, growing it only
// when its capacity is short (expert streaming packs into the same
// buffers on every miss).
func appendPackMat(dst []uint32, m *tensor.Mat) []uint32 {
	st := matStride(m.Cols, m.DType)
	n0 := len(dst)
	dst = slices.Grow(dst, m.Rows*st)[:n0+m.Rows*st]
	out := dst[n0:]
	clear(out)
	if m.DType == tensor.Q8 {
		for r := 0; r < m.Rows; r++ {
			row := out[r*st : (r+1)*st]
			for c, v := range m.I8[r*m.Cols : (r+1)*m.Cols] {
				row[c/4] |= uint32(uint8(v)) << (8 * (c % 4))
			}
			row[st-1] = math.Float32bits(m.Scale[r])
		}
		return dst
	}
	if scale, ok := blockScale(m.DType); ok {
		bb := m.DType.BlockBytes()
		nb := m.Cols / m.DType.BlockLen()
		body := bb - scale[1]
		rb := m.DType.RowBytes(m.Cols)
		row := make([]byte, 4*st)
		for r := 0; r < m.Rows; r++ {
			clear(row)
			for b, blk := 0, m.Q[r*rb:(r+1)*rb]; b < nb; b, blk = b+1, blk[bb:] {
				s0, s1 := scale[0], scale[0]+scale[1]
				n := copy(row[b*body:], blk[:s0])
				copy(row[b*body+n:], blk[s1:bb])
				copy(row[nb*body+b*scale[1]:], blk[s0:s1])
			}
			for i := range st {
				out[r*st+i] = binary.LittleEndian.Uint32(row[4*i:])
			}
		}
		return dst
	}
	if m.DType == tensor.F32 {
		for i, v := range m.F32 {
			out[i] = math.Float32bits(v)
		}
		return dst
	}
	for r := 0; r < m.Rows; r++ {
		row := m.U16[r*m.Cols : (r+1)*m.Cols]
		for c, h := range row {
			out[r*st+c/2] |= uint32(h) << (16 * (c & 1))
		}
	}
	return dst
}

// UploadMat copies a weight matrix into a new buffer, or into row-range
// parts when it is larger than one binding (see Mat). Half-precision
// matrices stay half precision on the GPU and the block formats of
// BlockFormat stay in their blocks; Q8 and the other block formats are
// widened to F16.
func (d *Device) UploadMat(m *tensor.Mat) (*Mat, error) {
	if m == nil || m.Rows <= 0 || m.Cols <= 0 {
		return nil, fmt.Errorf("wgsl: UploadMat: empty matrix")
	}
	m = gpuWeights(m)
	if m.DType > tensor.BF16 && !BlockFormat(m.DType) {
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

// gpuWeights returns m in a dtype the kernels read (GPUDType): Q8 and the
// block formats without kernels (Q4_1, Q5_1) are widened to f16 on upload
// (≤ 2^-11 relative error per weight); every other dtype is m itself.
func gpuWeights(m *tensor.Mat) *tensor.Mat {
	if m == nil || gpuDType(m) == m.DType {
		return m
	}
	return widen(m)
}

// widen returns m as F16 (m itself if it is F16).
func widen(m *tensor.Mat) *tensor.Mat {
	if m.DType == tensor.F16 {
		return m
	}
	u := make([]uint16, m.Rows*m.Cols)
	half.EncodeF16(u, m.Float32())
	return tensor.NewHalf(m.Rows, m.Cols, tensor.F16, u)
}

// entry is a kernel's entry point for weights of dt: the *_q variant for
// the block formats.
func entry(name string, dt tensor.DType) string {
	if BlockFormat(dt) {
		return name + "_q"
	}
	return name
}

func (m *Mat) check(what string, part ...string) error {
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
	return m.View.check((m.Rows-1)*m.Stride+matStride(m.Cols, m.DType), what, part...)
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

// check validates a gate epilogue for the projection W (H·DK rows) of op.
func (e *KDAGateEpilogue) check(op string, W *Mat) error {
	if W == nil || W.Rows != e.H*e.DK || e.H <= 0 || e.DK <= 0 {
		return fmt.Errorf("wgsl: %s: matrix for %d×%d gate channels", op, e.H, e.DK)
	}
	if e.DtBias.Buf == nil || e.DtBias.Buf != e.ALog.Buf {
		return fmt.Errorf("wgsl: %s: dt_bias and A_log must share a buffer", op)
	}
	nA := e.H
	if e.PerChannel {
		nA = e.H * e.DK
	}
	if err := e.DtBias.check(e.H*e.DK, op, "dt_bias"); err != nil {
		return err
	}
	return e.ALog.check(nA, op, "A_log")
}

// LinearKDAGate records g = KDAGate(x·Wᵀ) in one dispatch (the f_b
// projection of the KDA gate with the gate as its epilogue; W has H·DK
// rows), equal to Linear followed by KDAGate.
func (d *Device) LinearKDAGate(g, x View, T int, W *Mat, e KDAGateEpilogue) error {
	if err := e.check("LinearKDAGate", W); err != nil {
		return err
	}
	return d.linearEpi(g, W.Rows, x, W.Cols, T, W, false, &linearEpilogue{gated: true, gate: e}, 0)
}

// LinearNormed records out = RMSNorm(x; ν, eps)·Wᵀ, or out += that with
// accum, for one token (a GEMV: the RMSNorm of x is taken inside the
// projection), equal to RMSNorm then Linear / LinearAccum; x is left as it
// is. nu (ν) has W.Cols values; x and out must not share a buffer.
func (d *Device) LinearNormed(out View, accum bool, x View, W *Mat, nu View, eps float32) error {
	if W == nil {
		return fmt.Errorf("wgsl: LinearNormed: nil matrix")
	}
	if out.Buf == x.Buf && out.Buf != nil {
		return fmt.Errorf("wgsl: LinearNormed: x and out share a buffer")
	}
	if err := nu.check(W.Cols, "LinearNormed weight"); err != nil {
		return err
	}
	return d.linearEpi(out, W.Rows, x, W.Cols, 1, W, accum, &linearEpilogue{nu: nu, eps: eps}, 0)
}

// maxGatedNormCols is the widest input LinearGatedNorm and LinearGated take
// (their workgroup-memory copy of the gated input).
const maxGatedNormCols = 2048

// LinearGatedNorm records out (+)= RMSNormGated(x; g, ν, heads of dk,
// eps, act)·Wᵀ for one token in one GEMV (equal to RMSNormGated then
// Linear, or LinearAccum when accum): every workgroup normalises and gates
// x itself, in workgroup memory, so W.Cols ≤ 2048. x and g are left as
// they are; out must not share a buffer with x or g.
func (d *Device) LinearGatedNorm(out View, accum bool, x, g View, W *Mat, nu View, dk int, eps float32, act ref.GateAct) error {
	return d.linearGated(out, accum, x, g, W, nu, dk, eps, act, true)
}

// LinearGated records out (+)= (x ⊙ σ(g))·Wᵀ for one token in one GEMV
// (equal to SigmoidGate then Linear, or LinearAccum when accum), gating x
// in each workgroup's memory as LinearGatedNorm does, so W.Cols ≤ 2048. x
// and g are left as they are; out must not share a buffer with x or g.
func (d *Device) LinearGated(out View, accum bool, x, g View, W *Mat) error {
	if W == nil {
		return fmt.Errorf("wgsl: LinearGated: nil matrix")
	}
	return d.linearGated(out, accum, x, g, W, View{}, W.Cols, 0, ref.GateSigmoid, false)
}

// LinearGLU records out (+)= act(g, up)·Wᵀ (ref.Act.GLU of a GLU's gate
// and up projections: its down projection) for one token in one GEMV
// (equal to GLU then Linear, or LinearAccum when accum), activating in
// each workgroup's memory as LinearGatedNorm does, so W.Cols ≤ 2048. g and
// up are left as they are (they may share a buffer); out must not share a
// buffer with either.
func (d *Device) LinearGLU(out View, accum bool, g, up View, W *Mat, act ref.Act) error {
	if W == nil {
		return fmt.Errorf("wgsl: LinearGLU: nil matrix")
	}
	if _, err := actMode(act, "LinearGLU"); err != nil {
		return err
	}
	return d.gemvGated(out, accum, up, g, W, View{}, W.Cols, 0, 3, false, act)
}

// linearGated is LinearGatedNorm, or with norm false LinearGated (no norm:
// nu unused, one head of W.Cols).
func (d *Device) linearGated(out View, accum bool, x, g View, W *Mat, nu View, dk int, eps float32, act ref.GateAct, norm bool) error {
	gmode := 1
	if act == ref.GateSiLU {
		gmode = 2
	}
	return d.gemvGated(out, accum, x, g, W, nu, dk, eps, gmode, norm, ref.Act{})
}

// gemvGated is linearGated with gemv_gnorm's gate mode gmode (1 σ, 2
// SiLU), or with gmode 3 LinearGLU (x the up projection, g the gate, glu
// the activation).
func (d *Device) gemvGated(out View, accum bool, x, g View, W *Mat, nu View, dk int, eps float32, gmode int, norm bool, glu ref.Act) error {
	what := "LinearGatedNorm"
	switch {
	case gmode == 3:
		what = "LinearGLU"
	case !norm:
		what = "LinearGated"
	}
	if W == nil || dk <= 0 || W.Cols%dk != 0 || W.Cols > maxGatedNormCols || norm && dk > loopBudget/2 {
		return fmt.Errorf("wgsl: %s: matrix %v for heads of %d (≤ %d inputs)", what, W != nil, dk, maxGatedNormCols)
	}
	if out.Buf != nil && (out.Buf == x.Buf || out.Buf == g.Buf) {
		return fmt.Errorf("wgsl: %s: out shares a buffer with x or g", what)
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{x, W.Cols, "x"}, {g, W.Cols, "g"}, {nu, dk, "weight"}, {out, W.Rows, "out"}} {
		if c.name == "weight" && !norm {
			continue
		}
		if err := c.v.check(c.words, what, c.name); err != nil {
			return err
		}
	}
	if len(W.Parts) > 0 {
		off := 0
		for _, p := range W.Parts {
			if err := d.gemvGated(View{out.Buf, out.Off + off}, accum, x, g, p, nu, dk, eps, gmode, norm, glu); err != nil {
				return err
			}
			off += p.Rows
		}
		return nil
	}
	if err := W.check(what); err != nil {
		return err
	}
	k, err := d.weightKernel("linear.wgsl", entry("gemv_gnorm", W.DType), 5, W.DType)
	if err != nil {
		return err
	}
	p := params{}.u(W.Rows, W.Cols, 1, int(W.DType), W.Off, W.Stride, x.Off, W.Cols, out.Off, W.Rows, 1, b2i(accum)).
		u(0, 0, 1, 0, 0, 0, 0, 0).u(b2i(norm), nu.Off).f(eps).u(g.Off, dk, gmode).u(b2i(glu.SiTU)).f(glu.Beta, glu.BetaLin)
	return d.dispatch(k, p, []*Buffer{W.Buf, x.Buf, out.Buf, nu.Buf, g.Buf}, d.gemvGroups(W.Rows))
}

// linearEpilogue is what linear.wgsl does besides the product: the KDA gate
// on the outputs, or (GEMV only) an RMSNorm of the input with weight nu.
// (The gate is held by value: linearEpi's recursion would move a pointed-to
// gate to the heap on every call.)
type linearEpilogue struct {
	gated bool
	gate  KDAGateEpilogue
	nu    View
	eps   float32
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
	if T == 1 && e == nil && !accum {
		if r, ok := d.takeRes(x, W); ok {
			return d.gemvRes(out, W, &r)
		}
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
	name := "main"
	// a software adapter's GEMM: one thread per row, no barrier (main_rows),
	// where its whole-row loop fits the budget
	rows := T > 1 && d.gemvLanes() == 1 && (W.Cols+1)/2*8+1024 <= loopBudget
	switch {
	case T == 1:
		name = "gemv"
	case rows:
		name = "main_rows"
	}
	k, err := d.weightKernel("linear.wgsl", entry(name, W.DType), 5, W.DType)
	if err != nil {
		return err
	}
	tiles := (T + 7) / 8
	p := params{}.u(W.Rows, W.Cols, T, int(W.DType), W.Off, W.Stride, x.Off, xStride, out.Off, oStride, tiles, b2i(accum))
	var eb *Buffer
	if e != nil && e.gated {
		g := &e.gate
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
	if rows {
		groups = (W.Rows + 63) / 64 * tiles
	}
	if T == 1 {
		if (W.Cols+1)/2/d.gemvLanes() > loopBudget {
			return fmt.Errorf("wgsl: Linear: %d columns exceed the per-invocation loop budget", W.Cols)
		}
		groups = d.gemvGroups(W.Rows)
	}
	p = p.u(0, 1, 0)
	return d.dispatch(k, p, []*Buffer{W.Buf, x.Buf, out.Buf, eb, nil}, groups)
}

// LinearNormedGLU records out (+)= RMSNorm(x; ν, eps)·Wᵀ + act(g, up)·W2ᵀ
// for one token in one GEMV (equal to LinearNormed then LinearGLU adding
// into out): two projections of different inputs adding into one output,
// e.g. a LatentMoE block's up-projection and its shared experts' down
// projection. W and W2 have the same rows and dtype and lie in one buffer
// (declared together: Uploader.Mats), W.Cols + W2.Cols ≤ 2048; g and up
// share a buffer. x, g and up are left as they are; out must not share a
// buffer with them.
func (d *Device) LinearNormedGLU(out View, accum bool, x View, W *Mat, nu View, eps float32, g, up View, W2 *Mat, act ref.Act) error {
	if W == nil || W2 == nil {
		return fmt.Errorf("wgsl: LinearNormedGLU: nil matrix")
	}
	if W.Buf != W2.Buf || W.DType != W2.DType || W.Rows != W2.Rows || len(W.Parts)+len(W2.Parts) > 0 {
		return fmt.Errorf("wgsl: LinearNormedGLU: %dx%d %v and %dx%d %v matrices: want one row count and dtype, in one buffer",
			W.Rows, W.Cols, W.DType, W2.Rows, W2.Cols, W2.DType)
	}
	if W.Cols+W2.Cols > maxGatedNormCols {
		return fmt.Errorf("wgsl: LinearNormedGLU: %d + %d inputs (≤ %d)", W.Cols, W2.Cols, maxGatedNormCols)
	}
	if g.Buf != up.Buf {
		return fmt.Errorf("wgsl: LinearNormedGLU: gate and up in different buffers")
	}
	if out.Buf != nil && (out.Buf == x.Buf || out.Buf == g.Buf) {
		return fmt.Errorf("wgsl: LinearNormedGLU: out shares a buffer with x, gate or up")
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{x, W.Cols, "x"}, {nu, W.Cols, "weight"}, {g, W2.Cols, "gate"}, {up, W2.Cols, "up"}, {out, W.Rows, "out"}} {
		if err := c.v.check(c.words, "LinearNormedGLU", c.name); err != nil {
			return err
		}
	}
	if err := W.check("LinearNormedGLU"); err != nil {
		return err
	}
	if err := W2.check("LinearNormedGLU", "W2"); err != nil {
		return err
	}
	mode, err := actMode(act, "LinearNormedGLU")
	if err != nil {
		return err
	}
	k, err := d.weightKernel("linear.wgsl", entry("gemv_pair", W.DType), 5, W.DType)
	if err != nil {
		return err
	}
	p := params{}.u(W.Rows, W.Cols, 1, int(W.DType), W.Off, W.Stride, x.Off, W.Cols, out.Off, W.Rows, 1, b2i(accum)).
		u(0, 0, 1, 0, 0, 0, 0, 0).u(1, nu.Off).f(eps).u(g.Off, 0, 0).u(mode).f(act.Beta, act.BetaLin).
		u(W2.Cols, W2.Off, W2.Stride, up.Off)
	return d.dispatch(k, p, []*Buffer{W.Buf, x.Buf, out.Buf, nu.Buf, g.Buf}, d.gemvGroups(W.Rows))
}

// gpuLanes is the GEMV kernels' threads per row on a GPU (gemvLanes).
const gpuLanes = 8

// gemvLanes is the threads per output row of the GEMV kernels (gemv,
// gemv_gnorm, gemv_pair, gemv_res: linear.wgsl's LANES), whose workgroups
// of 64 threads each compute 64/lanes rows. On a GPU, 8 threads read a
// row's neighbouring words together and sum their shares in workgroup
// memory. On a software adapter every workgroup costs CPU time and every
// barrier more (SwiftShader: ≈ 70 µs per 8-row workgroup with barriers,
// ≈ 3 µs per workgroup without), so each thread computes a whole row, 64
// rows per workgroup, with no reduction (BENCHMARKS.md: k3-micro decode
// ≈ 1.4× on lavapipe, ≈ 1.6× on SwiftShader). Until SetGEMVLanes is called
// it is chosen by adapter: 1 on a software adapter (AdapterInfo.Software),
// 8 on any other and on an undescribed one.
func (d *Device) gemvLanes() int {
	switch {
	case d.lanes != 0:
		return d.lanes
	case d.adapter.Software() != "":
		return 1
	}
	return gpuLanes
}

// gemvGroups is the workgroups a GEMV of rows output rows runs.
func (d *Device) gemvGroups(rows int) int {
	per := 64 / d.gemvLanes()
	return (rows + per - 1) / per
}

// SetGEMVLanes sets the GEMV kernels' threads per row — 1 (a software
// adapter's shape) or 8 (a GPU's); 0 chooses by adapter (gemvLanes) — for
// tests and benchmarks that run either shape on any adapter, and returns a
// function that restores the choice before. Kernels compiled for each
// shape are kept apart.
func (d *Device) SetGEMVLanes(n int) (restore func()) {
	if n != 0 && n != 1 && n != gpuLanes {
		panic(fmt.Sprintf("wgsl: SetGEMVLanes(%d): want 0, 1 or %d", n, gpuLanes))
	}
	old := d.lanes
	d.lanes = n
	return func() { d.lanes = old }
}
