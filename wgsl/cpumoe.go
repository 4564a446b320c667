//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"time"

	"github.com/tessera-llm/tessera/core/cpu"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
)

// Experts on the CPU (RunnerOptions.CPUMoELayers, llama.cpp's --n-cpu-moe):
// the routed experts of the first N MoE layers are never uploaded; at such
// a layer the step is submitted up to the router, the experts' input rows
// and the routing are read back, the CPU backend (core/cpu, the CPU
// runner's kernels) computes Σ_k w_k · GLU_{e_k}(x) from the checkpoint's
// host weights, and the result is written back and added (or copied) into
// the layer's output. The router, shared experts and everything else stay
// on the GPU.

// cpuMoE is the host side of the CPU expert layers.
type cpuMoE struct {
	cb     *cpu.Backend
	pool   *ref.Pool
	layers map[*nn.GLU]bool
	x, y   []float32 // rows of the experts' input and output
	idx    []float32 // routing ids as the CPU backend holds them
	wts    []float32
	ids    []uint32
	span   []float32 // a strided readback
	yBuf   *Buffer   // the output rows on the GPU
	maxOut int
}

// cpuGLUs registers a layer whose experts run on the CPU.
func (b *gpu) cpuGLUs(ws []nn.GLU) {
	if b.cpuMoE == nil {
		p := ref.NewPool(0)
		b.cpuMoE = &cpuMoE{cb: cpu.New(p, cpu.Options{}), pool: p, layers: map[*nn.GLU]bool{}}
	}
	b.cpuMoE.layers[&ws[0]] = true
	b.cpuMoE.maxOut = max(b.cpuMoE.maxOut, ws[0].DownProj.Rows)
	b.xstats.CPULayers++
	b.xstats.Experts = len(ws)
	b.xstats.MoELayers++
}

// alloc sizes the host scratch and the output buffer for pieces of T
// tokens of K experts over inputs of width in.
func (c *cpuMoE) alloc(b *gpu, T, K, in int) {
	c.x, c.y = make([]float32, T*in), make([]float32, T*c.maxOut)
	c.idx, c.wts, c.ids = make([]float32, T*K), make([]float32, T*K), make([]uint32, T*K)
	var err error
	c.yBuf, err = b.newBuf(T * c.maxOut)
	b.fail(err)
}

func (c *cpuMoE) close() {
	if c != nil {
		c.pool.Close()
	}
}

// readRows reads T rows of cols values, stride apart, from v into dst.
func (c *cpuMoE) readRows(d *Device, v View, stride, cols, T int, dst []float32) error {
	if stride == cols || T == 1 {
		return d.ReadF32(v, dst[:T*cols])
	}
	n := (T-1)*stride + cols
	if cap(c.span) < n {
		c.span = make([]float32, n)
	}
	if err := d.ReadF32(v, c.span[:n]); err != nil {
		return err
	}
	for t := 0; t < T; t++ {
		copy(dst[t*cols:(t+1)*cols], c.span[t*stride:])
	}
	return nil
}

// cpuExperts is Experts for a layer whose experts run on the CPU.
func (b *gpu) cpuExperts(out, x *gt, T int, experts []nn.GLU, rt nn.Routing, act ref.Act, accum bool) {
	c, K := b.cpuMoE, rt.K
	in, outW := x.cols, out.cols
	idx, wts := g(rt.Idx).v, g(rt.Wts).v
	err := b.midRead(T, func() error {
		if err := c.readRows(b.d, x.v, x.stride, in, T, c.x); err != nil {
			return err
		}
		if err := b.d.ReadU32(idx, c.ids[:T*K]); err != nil {
			return err
		}
		return b.d.ReadF32(wts, c.wts[:T*K])
	})
	if err != nil {
		b.fail(fmt.Errorf("wgsl: experts on the CPU: read back the layer's input: %w", err))
		return
	}
	t0 := time.Now() // after the readbacks, which wait for the GPU's work before them
	for i, e := range c.ids[:T*K] {
		if int(e) >= len(experts) {
			b.fail(fmt.Errorf("wgsl: experts on the CPU: the router chose expert %d of %d", e, len(experts)))
			return
		}
		c.idx[i] = float32(e)
	}
	cb := c.cb
	cb.Begin()
	cb.Experts(cb.Slice(c.y[:T*outW], outW), cb.Slice(c.x[:T*in], in), T, experts,
		nn.Routing{Idx: cb.Slice(c.idx[:T*K], K), Wts: cb.Slice(c.wts[:T*K], K), K: K}, act, false)
	cb.End()
	if err := c.yBuf.WriteF32(0, c.y[:T*outW]); err != nil {
		b.fail(fmt.Errorf("wgsl: experts on the CPU: write the result: %w", err))
		return
	}
	y := &gt{v: c.yBuf.At(0), cols: outW, stride: outW}
	if accum {
		b.Add(out, y, T)
	} else {
		b.Copy(out, y, T)
	}
	b.xstats.CPUTime += time.Since(t0)
}
