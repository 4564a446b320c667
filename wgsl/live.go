//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/nn"
)

// The live routing/state view on the GPU (engine.LiveBackend). With a
// route hook set, every MoE layer's routed ids are copied (route_copy)
// into one small buffer as the step is recorded; a step that samples on
// the device also reduces each KDA state there (sumsq) and copies the
// token id next to them, so a decoded token is still one submission and
// one readback: [token | norm partials | ids of the piece]. A step that
// reads logits reads the ids after them; KDANorms reduces on demand when
// the last step did not. Without a hook the decode step is unchanged: one
// submission, only the token id read back.

// sumsqPer is how many elements each sumsq invocation adds (4096 per
// workgroup): far below lavapipe's loop cap.
const sumsqPer = 64

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
	return d.dispatch(kr, p, []*Buffer{ids.Buf, out.Buf}, (n+63)/64)
}

// SumSqGroups is the number of partial sums SumSq writes for n values.
func SumSqGroups(n int) int { return (n + 64*sumsqPer - 1) / (64 * sumsqPer) }

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

// liveCap is the gpu backend's routing capture: ids [MaxChunk, L, K] from
// word base of buf.
type liveCap struct {
	buf        *Buffer
	base, L, K int
	layer      int // the MoE layer being recorded (set by MoE)
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
	b.fail(b.d.RouteCopy(c.buf.At(c.base+c.layer*c.K), g(idx).v, T*K, K, c.L*c.K))
}

// liveState is the runner's side of the live view.
type liveState struct {
	hook    func(layer int, experts []int, T, K int)
	buf     *Buffer   // [token | norm partials | ids]
	normOff []int     // partial sums of layer i at 1 + [normOff[i], normOff[i+1])
	base    int       // first word of the ids
	host    []uint32  // readback
	ids     []int     // one layer's ids, handed to the hook
	norms   []float64 // KDA norms of the last step, when fresh
	fresh   bool      // norms were read with the last step
}

// liveBuffers lays out and allocates the live buffer (once).
func (r *Runner) liveBuffers() error {
	lv := &r.live
	if lv.buf != nil {
		return nil
	}
	s, c := r.st, r.cfg
	lv.normOff = make([]int, len(s.fixed)+1)
	for i, f := range s.fixed {
		lv.normOff[i+1] = lv.normOff[i]
		if len(f) > 0 {
			lv.normOff[i+1] += SumSqGroups(g(f[0]).cols)
		}
	}
	lv.base = 1 + lv.normOff[len(s.fixed)]
	words := lv.base + r.opt.MaxChunk*c.NumHiddenLayers*c.TopK
	buf, err := r.b.newBuf(words)
	if err != nil {
		lv.normOff = nil
		return fmt.Errorf("wgsl: live view: %w", err)
	}
	lv.buf, lv.host = buf, make([]uint32, words)
	lv.ids, lv.norms = make([]int, r.opt.MaxChunk*c.TopK), make([]float64, len(s.fixed))
	return nil
}

// SetRouteHook makes every later step report the experts each MoE layer
// chose (engine.LiveBackend): h(layer, experts[t·K+k], T, K) per MoE
// layer after the step; nil turns it off.
func (r *Runner) SetRouteHook(h func(layer int, experts []int, T, K int)) error {
	r.live.hook, r.b.live, r.live.fresh = nil, nil, false
	if h == nil {
		return nil
	}
	if err := r.liveBuffers(); err != nil {
		return err
	}
	r.live.hook = h
	r.b.live = &liveCap{buf: r.live.buf, base: r.live.base, L: r.cfg.NumHiddenLayers, K: r.cfg.TopK}
	return nil
}

// recordNorms records the sum-of-squares partials of every KDA state.
func (r *Runner) recordNorms() error {
	for i, f := range r.st.fixed {
		if len(f) > 0 {
			x := g(f[0])
			if err := r.d.SumSq(r.live.buf.At(1+r.live.normOff[i]), x.v, x.cols); err != nil {
				return err
			}
		}
	}
	return nil
}

// takeNorms turns the partials in host into the per-layer norms.
func (r *Runner) takeNorms() {
	lv := &r.live
	for i := range lv.norms {
		lv.norms[i] = math.NaN()
		if lv.normOff[i+1] > lv.normOff[i] {
			var sum float64
			for _, w := range lv.host[1+lv.normOff[i] : 1+lv.normOff[i+1]] {
				sum += float64(math.Float32frombits(w))
			}
			lv.norms[i] = math.Sqrt(sum)
		}
	}
	lv.fresh = true
}

// sampledLive finishes a step that sampled into outTok with the view on:
// the KDA reductions and the token id join the routed ids in the live
// buffer, read back at once. It returns the token.
func (r *Runner) sampledLive(T int) (int, error) {
	lv := &r.live
	if err := r.recordNorms(); err != nil {
		return 0, err
	}
	if err := r.d.RouteCopy(lv.buf.At(0), r.outTok.At(0), 1, 1, 1); err != nil {
		return 0, err
	}
	n := lv.base + T*r.cfg.NumHiddenLayers*r.cfg.TopK
	if err := r.d.ReadU32(lv.buf.At(0), lv.host[:n]); err != nil {
		return 0, err
	}
	r.takeNorms()
	r.deliver(T)
	return int(lv.host[0]), nil
}

// routes reads back the routing a step that read logits recorded and
// reports it to the route hook (after a successful step).
func (r *Runner) routes(err error) error {
	lv := &r.live
	if err != nil || lv.hook == nil {
		return err
	}
	T := r.last.Tokens
	n := T * r.cfg.NumHiddenLayers * r.cfg.TopK
	if err := r.d.ReadU32(lv.buf.At(lv.base), lv.host[lv.base:lv.base+n]); err != nil {
		return err
	}
	r.deliver(T)
	return nil
}

// deliver hands the routing of T tokens in host to the hook, layer by
// layer.
func (r *Runner) deliver(T int) {
	lv, c := &r.live, r.cfg
	L, K := c.NumHiddenLayers, c.TopK
	ids, host := lv.ids[:T*K], lv.host[lv.base:]
	for l := 0; l < L; l++ {
		if !c.IsMoE(l) {
			continue
		}
		for t := 0; t < T; t++ {
			for k := 0; k < K; k++ {
				ids[t*K+k] = int(host[(t*L+l)*K+k])
			}
		}
		lv.hook(l, ids, T, K)
	}
}

// KDANorms writes the Frobenius norm of each layer's KDA recurrent state
// S [H, dk, dv] into dst (NaN for layers without one): those read with the
// last step when it sampled with the view on, else reduced on the device
// now (one submission, a few floats per layer read back).
func (r *Runner) KDANorms(dst []float64) error {
	if err := r.liveBuffers(); err != nil {
		return err
	}
	lv := &r.live
	if !lv.fresh {
		if err := r.recordNorms(); err != nil {
			return err
		}
		if err := r.d.ReadU32(lv.buf.At(0), lv.host[:lv.base]); err != nil {
			return err
		}
		r.takeNorms()
	}
	for i := range dst {
		dst[i] = math.NaN()
		if i < len(lv.norms) {
			dst[i] = lv.norms[i]
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
