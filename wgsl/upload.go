//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/tensor"
)

// The GPU backend as an nn.Uploader: a family declares its weights
// (nn.Model.Declare) and each declaration is uploaded at once; a matrix or
// vector declared twice (tied embeddings) is uploaded once.

// Mats uploads matrices that multiply the same input (nil entries skipped)
// as stacks of their rows — each run of consecutive matrices of one dtype
// and width one matrix, e.g. a Q4_K_M layer's Q4_K projections apart from
// its Q6_K one — and keeps a view of each, so a decoded token computes
// their products in one GEMV per run (LinearBatch) while multi-token pieces
// use each view. A run that would not fit one binding is uploaded matrix
// by matrix. Runs of one dtype but different widths (matrices declared
// together whose products one kernel adds up: LinearNormedGLU) share one
// buffer when they fit one binding.
func (b *gpu) Mats(names []string, mats ...*tensor.Mat) {
	if b.err != nil {
		return
	}
	var ms []*tensor.Mat
	var keys []*tensor.Mat
	var mnames []string
	for i, m := range mats {
		if m == nil {
			continue
		}
		if _, ok := b.mats[m]; ok {
			if len(mats) == 1 {
				return // declared before (tied embeddings)
			}
			b.fail(fmt.Errorf("wgsl: %s declared twice", names[i]))
			return
		}
		w, err := m.Resolve()
		if err != nil {
			b.fail(fmt.Errorf("wgsl: runner: read %s: %w", names[i], err))
			return
		}
		ms = append(ms, gpuWeights(w))
		keys = append(keys, m)
		mnames = append(mnames, names[i])
	}
	if len(ms) == 0 {
		return
	}
	var runs [][2]int // [i, j): one matrix of their rows each
	words, oneDType := 0, true
	for i := 0; i < len(ms); {
		j, n := i+1, ms[i].Rows
		for j < len(ms) && ms[j].DType == ms[i].DType && ms[j].Cols == ms[i].Cols {
			n += ms[j].Rows
			j++
		}
		if j-i > 1 && MatWords(n, ms[i].Cols, ms[i].DType) > matPartWords {
			j, n = i+1, ms[i].Rows // too large for one binding: on its own
		}
		runs = append(runs, [2]int{i, j})
		words += MatWords(n, ms[i].Cols, ms[i].DType)
		oneDType = oneDType && ms[i].DType == ms[0].DType
		i = j
	}
	st := &stack{list: keys}
	stacked := make([]*tensor.Mat, len(runs))
	for i, r := range runs {
		stacked[i] = b.stackOf(ms[r[0]:r[1]], mnames[r[0]:r[1]])
	}
	if b.err != nil {
		return
	}
	var buf *Buffer // the runs' one buffer, when they share it
	if len(runs) > 1 && oneDType && words <= matPartWords {
		packed := make([]uint32, 0, words)
		for _, m := range stacked {
			packed = appendPackMat(packed, m)
		}
		var err error
		if buf, err = b.d.UploadU32(packed); err != nil {
			b.fail(fmt.Errorf("wgsl: runner: upload %s: %w", strings.Join(mnames, "+"), err))
			return
		}
		b.bufs = append(b.bufs, buf)
	}
	rows, off := 0, 0
	for i, r := range runs {
		m := stacked[i]
		var f *Mat
		if buf != nil {
			f = &Mat{View: buf.At(off), Rows: m.Rows, Cols: m.Cols, DType: m.DType, Stride: matStride(m.Cols, m.DType)}
			off += MatWords(m.Rows, m.Cols, m.DType)
		} else if f = b.upload(m, strings.Join(mnames[r[0]:r[1]], "+")); f == nil {
			return
		}
		b.keepViews(f, ms[r[0]:r[1]], keys[r[0]:r[1]])
		st.parts = append(st.parts, f)
		rows += f.Rows
	}
	if len(st.parts) < len(keys) { // at least two matrices share a GEMV
		b.stacks[keys[0]] = st
		b.maxIn = max(b.maxIn, rows)
	}
}

// stackOf is ms (one dtype and width) as one matrix of their rows in
// order (one matrix: itself).
func (b *gpu) stackOf(ms []*tensor.Mat, names []string) *tensor.Mat {
	if len(ms) == 1 {
		return ms[0]
	}
	st, rows := ms[0], 0
	for _, m := range ms {
		rows += m.Rows
	}
	var stacked *tensor.Mat
	switch {
	case st.DType.Blocked(): // rows of blocks: the stack is the rows' bytes in order
		var data []byte
		for _, m := range ms {
			data = append(data, m.Q...)
		}
		var err error
		if stacked, err = tensor.NewBlocked(rows, st.Cols, st.DType, data); err != nil {
			b.fail(fmt.Errorf("wgsl: runner: stack %s: %w", strings.Join(names, "+"), err))
			return ms[0]
		}
	case st.DType == tensor.F32:
		var data []float32
		for _, m := range ms {
			data = append(data, m.F32...)
		}
		stacked = tensor.NewF32(rows, st.Cols, data)
	case st.DType == tensor.Q8:
		var data []int8
		var scales []float32
		for _, m := range ms {
			data, scales = append(data, m.I8...), append(scales, m.Scale...)
		}
		stacked = tensor.NewQ8(rows, st.Cols, data, scales)
	default:
		var data []uint16
		for _, m := range ms {
			data = append(data, m.U16...)
		}
		stacked = tensor.NewHalf(rows, st.Cols, st.DType, data)
	}
	return stacked
}

// keepViews records each key's view of f, the stack of ms (one matrix:
// itself).
func (b *gpu) keepViews(f *Mat, ms, keys []*tensor.Mat) {
	if len(ms) == 1 {
		b.mats[keys[0]] = f
		return
	}
	r0 := 0
	for i, m := range ms {
		b.mats[keys[i]] = &Mat{View: View{f.Buf, f.Off + r0*f.Stride}, Rows: m.Rows, Cols: m.Cols, DType: f.DType, Stride: f.Stride}
		r0 += m.Rows
	}
}

func (b *gpu) upload(m *tensor.Mat, name string) *Mat {
	w, err := b.d.UploadMat(m)
	if err != nil {
		b.fail(fmt.Errorf("wgsl: runner: upload %s: %w", name, err))
		return nil
	}
	b.bufs = append(b.bufs, w.Buffers()...)
	return w
}

// Vecs uploads vectors (nil entries skipped) into one buffer, in order.
func (b *gpu) Vecs(names []string, vs ...[]float32) {
	if b.err != nil {
		return
	}
	var all [][]float32
	for i, v := range vs {
		if len(v) == 0 {
			continue
		}
		if _, ok := b.vecs[unsafe.SliceData(v)]; ok {
			if len(vs) == 1 {
				return
			}
			b.fail(fmt.Errorf("wgsl: %s declared twice", names[i]))
			return
		}
		all = append(all, v)
	}
	if len(all) == 0 {
		return
	}
	buf, err := b.d.UploadF32(slices.Concat(all...))
	if err != nil {
		b.fail(fmt.Errorf("wgsl: runner: upload %s: %w", strings.Join(names, "+"), err))
		return
	}
	b.bufs = append(b.bufs, buf)
	off := 0
	for _, v := range all {
		b.vecs[unsafe.SliceData(v)] = buf.At(off)
		off += len(v)
	}
}

// GLUs uploads a layer's experts (or one dense GLU) packed into two
// buffers (UploadGLU), or, when the runner streams experts, sets up the
// layer's expert slots (streamGLUs), or keeps them on the host for the
// first CPUMoELayers MoE layers (cpuGLUs).
func (b *gpu) GLUs(name string, ws []nn.GLU) {
	if b.err != nil || len(ws) == 0 {
		return
	}
	if len(ws) > 1 {
		b.moeSeen++
		if b.moeSeen <= b.cpuLayers {
			b.cpuGLUs(ws)
			return
		}
		if b.expertSlots > 0 && b.expertSlots < len(ws) {
			b.streamGLUs(name, ws)
			return
		}
	}
	var gs, us, ds []*tensor.Mat
	for i, w := range ws {
		for _, p := range []struct {
			dst  *[]*tensor.Mat
			m    *tensor.Mat
			what string
		}{{&gs, w.GateProj, "gate_proj"}, {&us, w.UpProj, "up_proj"}, {&ds, w.DownProj, "down_proj"}} {
			m, err := p.m.Resolve()
			if err != nil {
				b.fail(fmt.Errorf("wgsl: runner: read %s.%d.%s: %w", name, i, p.what, err))
				return
			}
			*p.dst = append(*p.dst, m)
		}
	}
	gw, err := b.d.UploadGLU(gs, us, ds)
	if err != nil {
		b.fail(fmt.Errorf("wgsl: runner: %s: %w", name, err))
		return
	}
	b.bufs = append(b.bufs, gw.GateUp, gw.Down)
	b.glus[&ws[0]] = gw
	K := 1
	if len(ws) > 1 {
		K = b.topK
		b.xstats.Slots, b.xstats.Experts = gw.E, gw.E
		b.xstats.MoELayers++
		b.maxE, b.maxOut = max(b.maxE, gw.E), max(b.maxOut, gw.Out)
	}
	b.maxI = max(b.maxI, K*gw.I)
}

// Err is the first error of the declarations.
// (gpu.Err serves both nn.Backend and nn.Uploader.)
