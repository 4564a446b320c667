//go:build cgo || js

package wgsl

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/nn"
)

// The live routing/state view on the GPU (engine.LiveBackend): with a
// route hook set, every MoE layer's routed ids are copied (route_copy)
// into a small buffer as the step is recorded, and read back after the
// step; KDANorms reduces each KDA state on the device (sumsq) and reads
// back a few partial sums per layer. Without a hook the decode step is
// unchanged: one submission, only the token id read back.

// sumsqPer is how many elements each sumsq invocation adds (4096 per
// workgroup): far below lavapipe's loop cap.
const sumsqPer = 16

// RouteCopy records O[t·stride + j] = ids[t·k + j] for the n = T·k u32
// expert ids at ids (live.wgsl route_copy).
func (d *Device) RouteCopy(out, ids View, n, k, stride int) error {
	if n <= 0 || k <= 0 || n%k != 0 || stride < k {
		return fmt.Errorf("wgsl: RouteCopy: n %d, k %d, stride %d", n, k, stride)
	}
	if err := ids.check(n, "RouteCopy ids"); err != nil {
		return err
	}
	if err := out.check((n/k-1)*stride+k, "RouteCopy out"); err != nil {
		return err
	}
	kr, err := d.kernel("live.wgsl", "route_copy", 2)
	if err != nil {
		return err
	}
	p := params{}.u(n, 0, ids.Off, out.Off, k, stride)
	return d.dispatch(kr, p, []*Buffer{ids.Buf, out.Buf}, (n+255)/256)
}

// SumSqGroups is the number of partial sums SumSq writes for n values.
func SumSqGroups(n int) int { return (n + 256*sumsqPer - 1) / (256 * sumsqPer) }

// SumSq records out[g] = the sum of squares of the g-th block of 4096 of
// the n floats at x, for g < SumSqGroups(n) (live.wgsl sumsq); the host
// adds the partial sums up.
func (d *Device) SumSq(out, x View, n int) error {
	if n <= 0 {
		return fmt.Errorf("wgsl: SumSq of %d values", n)
	}
	if err := x.check(n, "SumSq x"); err != nil {
		return err
	}
	groups := SumSqGroups(n)
	if err := out.check(groups, "SumSq out"); err != nil {
		return err
	}
	k, err := d.kernel("live.wgsl", "sumsq", 2)
	if err != nil {
		return err
	}
	return d.dispatch(k, params{}.u(n, sumsqPer, x.Off, out.Off), []*Buffer{x.Buf, out.Buf}, groups)
}

// liveCap is the gpu backend's routing capture: ids [MaxChunk, L, K].
type liveCap struct {
	ids   *Buffer
	L, K  int
	layer int // the MoE layer being recorded (set by MoE)
}

// MoE notes which layer the next Route belongs to for the routing
// capture; it returns false, so nn.MoEBlock runs the block op by op.
func (b *gpu) MoE(_, _ nn.Tensor, _ int, _ *nn.MoE, a *nn.MoEArgs, _ bool) bool {
	if b.live != nil {
		b.live.layer = a.Layer
	}
	return false
}

// capture copies the routed ids of T tokens of the current MoE layer.
func (b *gpu) capture(idx nn.Tensor, T, K int) {
	c := b.live
	if c == nil || b.err != nil || K != c.K {
		return
	}
	b.fail(b.d.RouteCopy(c.ids.At(c.layer*c.K), g(idx).v, T*K, K, c.L*c.K))
}

// SetRouteHook makes every later step report the experts each MoE layer
// chose (engine.LiveBackend): h(layer, experts[t·K+k], T, K) per MoE
// layer after the step, from one extra readback; nil turns it off.
func (r *Runner) SetRouteHook(h func(layer int, experts []int, T, K int)) {
	r.routeHook = h
	if h == nil {
		r.b.live = nil
		return
	}
	c, L := r.cfg, r.cfg.NumHiddenLayers
	if r.liveIDs == nil {
		buf, err := r.b.newBuf(max(1, r.opt.MaxChunk*L*c.TopK))
		if err != nil {
			r.liveErr = err
			return
		}
		r.liveIDs = buf
	}
	r.b.live = &liveCap{ids: r.liveIDs, L: L, K: c.TopK}
}

// routes reads back the routing the step recorded and reports it to the
// route hook (after a successful step).
func (r *Runner) routes(err error) error {
	if err != nil || r.routeHook == nil {
		return err
	}
	if r.liveErr != nil {
		return fmt.Errorf("wgsl: live view: %w", r.liveErr)
	}
	c, T := r.cfg, r.last.Tokens
	L, K := c.NumHiddenLayers, c.TopK
	n := T * L * K
	if cap(r.liveHost) < n {
		r.liveHost, r.liveInts = make([]uint32, n), make([]int, T*K)
	}
	host := r.liveHost[:n]
	if err := r.d.ReadU32(r.liveIDs.At(0), host); err != nil {
		return err
	}
	ids := r.liveInts[:T*K]
	for l := 0; l < L; l++ {
		if !c.IsMoE(l) {
			continue
		}
		for t := 0; t < T; t++ {
			for k := 0; k < K; k++ {
				ids[t*K+k] = int(host[(t*L+l)*K+k])
			}
		}
		r.routeHook(l, ids, T, K)
	}
	return nil
}

// KDANorms writes the Frobenius norm of each layer's KDA recurrent state
// S [H, dk, dv] into dst (NaN for layers without one), reduced on the
// device: one submission, a few floats per layer read back.
func (r *Runner) KDANorms(dst []float64) error {
	s := r.st
	if r.normOff == nil {
		r.normOff = make([]int, len(s.fixed)+1)
		for i, f := range s.fixed {
			r.normOff[i+1] = r.normOff[i]
			if len(f) > 0 {
				r.normOff[i+1] += SumSqGroups(g(f[0]).cols)
			}
		}
		if n := r.normOff[len(s.fixed)]; n > 0 {
			buf, err := r.b.newBuf(n)
			if err != nil {
				r.normOff = nil
				return err
			}
			r.liveNorm, r.normHost = buf, make([]float32, n)
		}
	}
	off := r.normOff
	for i, f := range s.fixed {
		if len(f) > 0 {
			x := g(f[0])
			if err := r.d.SumSq(r.liveNorm.At(off[i]), x.v, x.cols); err != nil {
				return err
			}
		}
	}
	if r.liveNorm != nil {
		if err := r.d.ReadF32(r.liveNorm.At(0), r.normHost); err != nil {
			return err
		}
	}
	for i := range dst {
		dst[i] = math.NaN()
		if i < len(s.fixed) && off[i+1] > off[i] {
			var sum float64
			for _, p := range r.normHost[off[i]:off[i+1]] {
				sum += float64(p)
			}
			dst[i] = math.Sqrt(sum)
		}
	}
	return nil
}

// LiveMemory is the MLA caches' tokens and allocated bytes and the whole
// sequence state's bytes (engine.LiveBackend).
func (r *Runner) LiveMemory() (cacheTokens int, cacheBytes, stateBytes int64) {
	for _, c := range r.st.caches {
		if c != nil {
			cacheTokens = max(cacheTokens, c.Len)
			cacheBytes += c.Bytes()
		}
	}
	return cacheTokens, cacheBytes, r.st.Bytes()
}
