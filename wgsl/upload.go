//go:build cgo || js

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
// as one matrix of their rows stacked, and keeps a view of each, so a
// decoded token computes all their products in one GEMV (LinearBatch)
// while multi-token pieces use each view. When the matrices differ in
// dtype or width, or the stack would not fit one binding, each is uploaded
// on its own.
func (b *gpu) Mats(names []string, mats ...*tensor.Mat) {
	if b.err != nil {
		return
	}
	var ms []*tensor.Mat
	var keys []*tensor.Mat
	rows := 0
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
		rows += w.Rows
	}
	if len(ms) == 0 {
		return
	}
	ok := len(ms) > 1
	for _, m := range ms {
		ok = ok && m.DType == ms[0].DType && m.Cols == ms[0].Cols
	}
	if !ok || MatWords(rows, ms[0].Cols, ms[0].DType) > matPartWords {
		n := 0
		for i, m := range mats {
			if m != nil {
				b.mats[m] = b.upload(ms[n], names[i])
				n++
			}
		}
		return
	}
	st := ms[0]
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
			return
		}
	case st.DType == tensor.F32:
		var data []float32
		for _, m := range ms {
			data = append(data, m.F32...)
		}
		stacked = tensor.NewF32(rows, st.Cols, data)
	default:
		var data []uint16
		for _, m := range ms {
			data = append(data, m.U16...)
		}
		stacked = tensor.NewHalf(rows, st.Cols, st.DType, data)
	}
	f := b.upload(stacked, strings.Join(names, "+"))
	if f == nil {
		return
	}
	r0 := 0
	for i, m := range ms {
		b.mats[keys[i]] = &Mat{View: View{f.Buf, f.Off + r0*f.Stride}, Rows: m.Rows, Cols: m.Cols, DType: f.DType, Stride: f.Stride}
		r0 += m.Rows
	}
	b.stacks[keys[0]] = &stack{f: f, list: keys}
	b.maxIn = max(b.maxIn, rows)
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
