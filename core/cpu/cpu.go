package cpu

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// New returns a backend running on pool p.
func New(p *ref.Pool, opt Options) *Backend {
	if opt.KDAChunk <= 0 {
		opt.KDAChunk = 64
	}
	return &Backend{Pool: p, Opt: opt}
}

// cten is a CPU tensor: rows of cols values, row r at d[r·stride:].
type cten struct {
	d            []float32
	cols, stride int
}

// Vec is a flat slice as a one-row tensor handle (new, not from the
// arena: for state kept across passes).
func Vec(x []float32) nn.Tensor { return &cten{d: x, cols: len(x), stride: len(x)} }

// Data is t's values: the first T rows of a contiguous tensor, or row by
// row gathered into scratch (valid until the next op).
func (b *Backend) Data(t nn.Tensor, T int) []float32 { return gather(ct(t), T, &b.tmp) }

// Store writes (accum false) or adds (accum true) the T rows of y
// ([T, cols], contiguous) into out.
func (b *Backend) Store(out nn.Tensor, y []float32, T int, accum bool) {
	o := ct(out)
	for t := 0; t < T; t++ {
		if accum {
			add(o.row(t), y[t*o.cols:])
		} else {
			copy(o.row(t), y[t*o.cols:(t+1)*o.cols])
		}
	}
}

// Slice is x as a tensor of rows of cols values, from the pass's arena.
func (b *Backend) Slice(x []float32, cols int) nn.Tensor {
	return b.view(cten{d: x, cols: cols, stride: cols})
}

func ct(t nn.Tensor) cten { return *t.(*cten) }

// flat is the first T rows of a contiguous tensor as one slice.
func (t cten) flat(T int) []float32 {
	if t.stride != t.cols {
		panic(fmt.Sprintf("model: cpu op on a strided tensor (%d of %d)", t.cols, t.stride))
	}
	return t.d[:T*t.cols]
}

func (t cten) row(r int) []float32 { return t.d[r*t.stride:][:t.cols] }

// Options tune a Backend.
type Options struct {
	// KDAChunk is the chunk size of the chunked (WY/UT) delta rule.
	// Default 64.
	KDAChunk int
	// Recurrent makes multi-token pieces use the recurrent delta rule and
	// the absorbed MLA form (the forms decode uses). For tests.
	Recurrent bool
}

// Backend is the CPU reference backend (nn.Backend): the ops are
// core/ref's kernels on a worker pool; the delta rule runs chunked for
// multi-token pieces, a decoded token's projections are batched into one
// parallel region (LinearBatch). Scratch grows on first use, so after a
// first pass of each shape nothing is allocated.
type Backend struct {
	Pool *ref.Pool
	Opt  Options

	mla     ref.MLAScratch
	tmp     []float32 // strided operands gathered
	tmp2    []float32
	res     []float32 // a result added or copied into a strided output
	h1      []float32 // GLU hidden activations
	h2      []float32
	one     []float32 // one expert's output row
	route   []float32 // Route's scratch
	srcs    [][]float32
	score   []float32
	attnRes attnResJob
	gemvs   []ref.GEMV
	ridx    []int // Route's ids
	gqa     ref.GQAArgs

	// views made during a forward pass come from this arena, reused by
	// the next pass (Begin), so decoding allocates nothing
	views  []*cten
	nv     int
	inPass bool
}

func (b *Backend) Err() error { return nil }

// Begin starts a forward pass: views made from now on reuse the arena.
func (b *Backend) Begin() { b.nv, b.inPass = 0, true }

// End ends a forward pass: views made after it are kept.
func (b *Backend) End() { b.inPass = false }

// view returns t as a tensor handle: from the arena inside a pass, else a
// new one.
func (b *Backend) view(t cten) nn.Tensor {
	if !b.inPass {
		p := new(cten)
		*p = t
		return p
	}
	if b.nv == len(b.views) {
		b.views = append(b.views, new(cten))
	}
	p := b.views[b.nv]
	b.nv++
	*p = t
	return p
}

func (b *Backend) Alloc(rows, cols int) nn.Tensor {
	return &cten{d: make([]float32, rows*cols), cols: cols, stride: cols}
}

func (b *Backend) Rows(t nn.Tensor, r0 int) nn.Tensor {
	x := ct(t)
	return b.view(cten{d: x.d[r0*x.stride:], cols: x.cols, stride: x.stride})
}

func (b *Backend) Reshape(t nn.Tensor, cols int) nn.Tensor {
	x := ct(t)
	if x.stride != x.cols {
		panic("model: Reshape of a strided tensor")
	}
	return b.view(cten{d: x.d, cols: cols, stride: cols})
}

func (b *Backend) Cols(t nn.Tensor, c0, n int) nn.Tensor {
	x := ct(t)
	return b.view(cten{d: x.d[c0:], cols: n, stride: x.stride})
}

func (b *Backend) Embed(out nn.Tensor, table *tensor.Mat, ids []int) {
	o := ct(out)
	for t, id := range ids {
		row := o.row(t)
		copy(row, table.Row(id, row))
	}
}

func (b *Backend) SetRows(out nn.Tensor, data []float32, T int) {
	o := ct(out)
	for t := 0; t < T; t++ {
		copy(o.row(t), data[t*o.cols:])
	}
}

func (b *Backend) Copy(out, x nn.Tensor, T int) {
	o, s := ct(out), ct(x)
	for t := 0; t < T; t++ {
		copy(o.row(t), s.row(t))
	}
}

func (b *Backend) Add(out, x nn.Tensor, T int) {
	o, s := ct(out), ct(x)
	for t := 0; t < T; t++ {
		add(o.row(t), s.row(t))
	}
}

func add(dst, src []float32) {
	src = src[:len(dst)]
	for i := range dst {
		dst[i] += src[i]
	}
}

// gather returns the first T rows of t contiguous (t itself, or a copy in
// buf).
func gather(t cten, T int, buf *[]float32) []float32 {
	if t.stride == t.cols {
		return t.d[:T*t.cols]
	}
	if cap(*buf) < T*t.cols {
		*buf = make([]float32, T*t.cols)
	}
	g := (*buf)[:T*t.cols]
	for r := 0; r < T; r++ {
		copy(g[r*t.cols:(r+1)*t.cols], t.row(r))
	}
	return g
}

func (b *Backend) Linear(out, x nn.Tensor, T int, W *tensor.Mat) {
	o, xs := ct(out), gather(ct(x), T, &b.tmp)
	if o.stride == o.cols {
		ref.Linear(b.Pool, o.d[:T*W.Rows], xs, T, W)
		return
	}
	y := grow(&b.tmp2, T*W.Rows)
	ref.Linear(b.Pool, y, xs, T, W)
	for t := 0; t < T; t++ {
		copy(o.row(t), y[t*W.Rows:])
	}
}

func (b *Backend) RMSNorm(out, x nn.Tensor, T int, w []float32, eps float32) {
	o, s := ct(out), ct(x)
	if o.stride == o.cols && s.stride == s.cols {
		ref.RMSNorm(o.d[:T*o.cols], s.d[:T*s.cols], w, eps)
		return
	}
	for t := 0; t < T; t++ {
		ref.RMSNorm(o.row(t), s.row(t), w, eps)
	}
}

func (b *Backend) RMSNormGated(out, x, g nn.Tensor, T int, w []float32, eps float32, act ref.GateAct) {
	ref.RMSNormGated(ct(out).flat(T), ct(x).flat(T), ct(g).flat(T), w, eps, act)
}

func (b *Backend) L2Norm(x nn.Tensor, T, n int, eps, scale float32) {
	ref.L2Norm(ct(x).flat(T), n, eps, scale)
}

func (b *Backend) Sigmoid(x nn.Tensor, T int) {
	v := ct(x).flat(T)
	ref.Sigmoids(v, v)
}

func (b *Backend) SigmoidGate(x, g nn.Tensor, T int) {
	o, gv := ct(x).flat(T), ct(g).flat(T)
	s := grow(&b.tmp2, len(gv))
	ref.Sigmoids(s, gv)
	for i, v := range s {
		o[i] *= v
	}
}

func (b *Backend) ShortConv(out, x nn.Tensor, T int, w []float32, tail nn.Tensor, K int) {
	xs := ct(x)
	ref.ShortConvRows(b.Pool, ct(out).flat(T), xs.flat(T), w, ct(tail).d, T, xs.cols, K)
}

func (b *Backend) KDAGate(g nn.Tensor, T int, a nn.KDAGateArgs) {
	v := ct(g).flat(T)
	ref.KDAGate(v, v, a.DtBias, a.ALog, a.H, a.DK, a.Bounded, a.LowerBound)
}

func (b *Backend) DeltaRule(a *nn.DeltaArgs) {
	T := a.T
	k := ref.KDAArgs{T: T, H: a.H, DK: a.DK, DV: a.DV, Q: ct(a.Q).flat(T), K: ct(a.K).flat(T), V: ct(a.V).flat(T),
		G: ct(a.G).flat(T), Beta: ct(a.Beta).flat(T), O: ct(a.O).flat(T), S: ct(a.S).d}
	if T == 1 || b.Opt.Recurrent {
		ref.KDARecurrent(b.Pool, &k)
	} else {
		ref.KDAChunked(b.Pool, &k, b.Opt.KDAChunk)
	}
}

func (b *Backend) Append(c nn.Cache, rows nn.Tensor, T int) {
	c.(*ref.LatentCache).Append(ct(rows).flat(T))
}

func (b *Backend) LatentAttention(a *nn.LatentArgs) {
	c := a.Cache.(*ref.LatentCache)
	m := ref.MLAArgs{N: a.T, H: a.H, DN: a.DN, DR: a.DR, DV: a.DV, RKV: a.RKV, Pos0: c.Len() - a.T,
		Scale: a.Scale, Q: ct(a.Q).flat(a.T), WKVB: a.WKVB, Cache: c, O: ct(a.O).flat(a.T)}
	if a.T == 1 || b.Opt.Recurrent {
		ref.MLAAbsorbed(b.Pool, &m, &b.mla)
	} else {
		ref.MLANaive(b.Pool, &m, &b.mla)
	}
}

// result is where an op writes a [T, n] result that goes (accum) into
// out: out itself when it is contiguous and not accumulated into, else
// the scratch tmp; commit then adds or copies it into out.
func (b *Backend) result(out cten, T int, accum bool) []float32 {
	if !accum && out.stride == out.cols {
		return out.d[:T*out.cols]
	}
	return grow(&b.res, T*out.cols)
}

// grow returns (*buf)[:n], reallocating when it is shorter.
func grow(buf *[]float32, n int) []float32 {
	if cap(*buf) < n {
		*buf = make([]float32, n)
	}
	return (*buf)[:n]
}

func (b *Backend) commit(out cten, y []float32, T int, accum bool) {
	if !accum && out.stride == out.cols {
		return
	}
	for t := 0; t < T; t++ {
		if accum {
			add(out.row(t), y[t*out.cols:])
		} else {
			copy(out.row(t), y[t*out.cols:(t+1)*out.cols])
		}
	}
}

func (b *Backend) GLU(out, x nn.Tensor, T int, w *nn.GLU, act ref.Act, accum bool) {
	o := ct(out)
	y := b.result(o, T, accum)
	I := w.GateProj.Rows
	b.GLURows(b.Pool, w, act, gather(ct(x), T, &b.tmp), y, T, grow(&b.h1, T*I), grow(&b.h2, T*I))
	b.commit(o, y, T, accum)
}

// GLURows evaluates a GLU block for T rows on pool p: out = down(act(gate
// x, up x)). h1 and h2 are scratch of at least T·I floats.
func (b *Backend) GLURows(p *ref.Pool, w *nn.GLU, act ref.Act, x, out []float32, T int, h1, h2 []float32) {
	I := w.GateProj.Rows
	h1, h2 = h1[:T*I], h2[:T*I]
	ref.Linear(p, h1, x, T, w.GateProj)
	ref.Linear(p, h2, x, T, w.UpProj)
	act.GLU(h1, h1, h2)
	ref.Linear(p, out, h1, T, w.DownProj)
}

func (b *Backend) GLUAct(gate, up nn.Tensor, T int, act ref.Act) {
	g := ct(gate).flat(T)
	act.GLU(g, g, ct(up).flat(T))
}

func (b *Backend) Route(rt nn.Routing, logits nn.Tensor, T int, bias []float32, r ref.Router) {
	lg, K := ct(logits), rt.K
	idx, wts := ct(rt.Idx).flat(T), ct(rt.Wts).flat(T)
	if len(b.ridx) < K {
		b.ridx = make([]int, K)
	}
	scratch := grow(&b.route, 2*lg.cols)
	for t := 0; t < T; t++ {
		r.Route(b.ridx[:K], wts[t*K:(t+1)*K], lg.row(t), bias, scratch)
		for k, e := range b.ridx[:K] {
			idx[t*K+k] = float32(e)
		}
	}
}

func (b *Backend) Experts(out, x nn.Tensor, T int, experts []nn.GLU, rt nn.Routing, act ref.Act, accum bool) {
	o, xs, K := ct(out), ct(x), rt.K
	idx, wts := ct(rt.Idx).flat(T), ct(rt.Wts).flat(T)
	one := grow(&b.one, o.cols)
	for t := 0; t < T; t++ {
		row := o.row(t)
		if !accum {
			clear(row)
		}
		for k := 0; k < K; k++ {
			w := &experts[int(idx[t*K+k])]
			I := w.GateProj.Rows
			b.GLURows(b.Pool, w, act, xs.row(t), one, 1, grow(&b.h1, I), grow(&b.h2, I))
			ref.Axpy(wts[t*K+k], one, row)
		}
	}
}

// AttnRes runs ref.AttnRes for each token, the tokens of a prefill piece
// split over the workers.
func (b *Backend) AttnRes(out nn.Tensor, srcs []nn.Tensor, T int, w, gamma []float32, eps float32) {
	nw := 1
	if b.Pool != nil {
		nw = b.Pool.Workers()
	}
	if len(b.srcs) < nw*len(srcs) {
		b.srcs = make([][]float32, nw*len(srcs))
		b.score = make([]float32, nw*len(srcs))
	}
	j := &b.attnRes
	*j = attnResJob{b: b, out: ct(out), srcs: srcs, w: w, gamma: gamma, eps: eps}
	if T == 1 || nw == 1 {
		j.Run(0, 0, T)
	} else {
		b.Pool.For(T, 1, j)
	}
	*j = attnResJob{}
}

// attnResJob is AttnRes over tokens [lo, hi), with worker w's slices of
// the backend's row list and score scratch.
type attnResJob struct {
	b        *Backend
	out      cten
	srcs     []nn.Tensor
	w, gamma []float32
	eps      float32
}

func (j *attnResJob) Run(w, lo, hi int) {
	n := len(j.srcs)
	rows, score := j.b.srcs[w*n:(w+1)*n], j.b.score[w*n:(w+1)*n]
	for t := lo; t < hi; t++ {
		for i, s := range j.srcs {
			rows[i] = ct(s).row(t)
		}
		ref.AttnRes(j.out.row(t), rows, j.w, j.gamma, j.eps, score)
	}
}

// LinearBatch computes a decoded token's products in one parallel region
// (ref.LinearBatch).
func (b *Backend) LinearBatch(T int, ps []nn.Product) bool {
	if T != 1 {
		return false
	}
	gs := b.gemvs[:0]
	for _, p := range ps {
		if p.W != nil {
			gs = append(gs, ref.GEMV{W: p.W, X: ct(p.X).row(0), Out: ct(p.Out).d[:p.W.Rows]})
		}
	}
	ref.LinearBatch(b.Pool, gs)
	b.gemvs = gs[:0]
	return true
}
