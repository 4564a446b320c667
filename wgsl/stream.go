//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"math"
	"time"

	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Expert streaming: a runner whose GPU memory budget is below the model's
// size (RunnerOptions.MemoryBudget, or ExpertSlots) keeps the dense part,
// the states, caches and scratch on the GPU together with S of each MoE
// layer's E routed experts (the layer's slots, S ≥ top-k); the other
// experts stay in host memory (the checkpoint's mapped or fetched bytes)
// and are uploaded into a slot when routed. At a streamed MoE layer the
// token's step is split: what is recorded up to the router is submitted,
// the top-k expert ids are read back (T·K words), each routed expert gets
// a slot (a hit when it is resident; else the slot of the expert routed
// least often lately, not needed by the same tokens, is overwritten: a
// frequency count with exponential decay, freqDecay), the id → slot table
// is written, and the expert kernels run over the slot buffers — the same
// kernels reading the same words (PackGLU packs a slot as UploadGLU packs
// an expert), so the logits equal the all-resident run's. A prefill piece
// whose tokens route to more distinct experts than there are slots runs
// expert-major (streamByExpert): passes over groups of S of its experts,
// each uploaded once, the other experts' routing weights masked to 0 —
// on a 64-token k3-micro piece 4× fewer uploads than runs of tokens that
// each fit (the other way, kept behind expertMajor), for the same time on
// lavapipe, where the repeated expert compute costs what the uploads saved.

// expertCache is one MoE layer's slots: w holds S experts packed as
// UploadGLU packs E, expert e of host in slot slotOf[e].
type expertCache struct {
	name      string
	layer     int // MoE layer ordinal (for UploadFault)
	host      []nn.GLU
	w         *GLUWeights // E = S slots
	guWords   int         // words of one expert in w.GateUp
	dnWords   int         // in w.Down
	slotOf    []int32     // expert → slot, −1 when not resident
	expOf     []int32     // slot → expert, −1 when empty
	used      []int64     // slot → tick of its last use (ties)
	pin       []int64     // slot → the run that needs it
	mark      []int64     // expert → the run that counted it
	list      []int32     // a piece's distinct experts (streamByExpert)
	freq      []float64   // expert → its routing count decayed by freqDecay per lookup, as of stamp
	stamp     []int64     // expert → the tick freq is as of
	tick, run int64
}

// freqDecay is the decay per lookup of the experts' routing counts: the
// slot evicted on a miss is the one whose expert has the smallest decayed
// count (ties: least recently used). On routing traces of the trained
// k3-micro (three texts, 128 decoded tokens each) it hit 3–15 points more
// often than LRU with 16 of 64 slots and 0–15 more with 32
// (BENCHMARKS.md, expert streaming); of the decays tried (0.9–0.995),
// 0.98 did best on one text and 0.99–0.995 on the other two.
const freqDecay = 0.99

// count is expert e's decayed routing count at the current tick.
func (c *expertCache) count(e int) float64 {
	return c.freq[e] * math.Pow(freqDecay, float64(c.tick-c.stamp[e]))
}

// streamGLUs sets up a streamed layer: its slot buffers, filled with its
// first S experts.
func (b *gpu) streamGLUs(name string, ws []nn.GLU) {
	S, E := b.expertSlots, len(ws)
	c := &expertCache{name: name, layer: len(b.streams), host: ws, slotOf: make([]int32, E), expOf: make([]int32, S),
		used: make([]int64, S), pin: make([]int64, S), mark: make([]int64, E), freq: make([]float64, E), stamp: make([]int64, E)}
	w, gu, dn, err := c.pack(0, nil, nil)
	if err != nil {
		b.fail(err)
		return
	}
	c.guWords, c.dnWords = len(gu), len(dn)
	if S*c.guWords > maxBindingWords || S*c.dnWords > maxBindingWords {
		b.fail(fmt.Errorf("wgsl: runner: %s: %d expert slots of %dx%d take more than one 128 MiB binding", name, S, w.I, w.In))
		return
	}
	w.E = S
	if w.GateUp, err = b.newBuf(S * c.guWords); err == nil {
		w.Down, err = b.newBuf(S * c.dnWords)
	}
	if err != nil {
		b.fail(fmt.Errorf("wgsl: runner: %s: expert slots: %w", name, err))
		return
	}
	c.w = w
	for e := range c.slotOf {
		c.slotOf[e] = -1
	}
	for s := range c.expOf {
		c.expOf[s] = -1
		c.pin[s] = -1
	}
	for e := 0; e < S && b.err == nil; e++ {
		b.fail(b.fill(c, e, e, false))
	}
	b.streams[&ws[0]] = c
	b.xstats.Streaming, b.xstats.Slots, b.xstats.Experts = true, S, E
	b.xstats.MoELayers++
	b.maxE, b.maxOut = max(b.maxE, S), max(b.maxOut, w.Out)
	b.maxI = max(b.maxI, b.topK*w.I)
}

// pack resolves expert e's matrices and packs them (PackGLU of one) into
// gu[:0] and dn[:0] (grown when short).
func (c *expertCache) pack(e int, gu, dn []uint32) (*GLUWeights, []uint32, []uint32, error) {
	x := &c.host[e]
	var ms [3]*tensor.Mat
	for i, p := range []struct {
		m    *tensor.Mat
		what string
	}{{x.GateProj, "gate_proj"}, {x.UpProj, "up_proj"}, {x.DownProj, "down_proj"}} {
		m, err := p.m.Resolve()
		if err != nil {
			return nil, nil, nil, fmt.Errorf("wgsl: runner: read %s.%d.%s: %w", c.name, e, p.what, err)
		}
		ms[i] = m
	}
	w, gu, dn, err := packGLU(gu, dn, ms[:1], ms[1:2], ms[2:])
	if err != nil {
		return nil, nil, nil, fmt.Errorf("wgsl: runner: %s.%d: %w", c.name, e, err)
	}
	return w, gu, dn, nil
}

// fill uploads expert e into slot s (counted in the stats when count).
func (b *gpu) fill(c *expertCache, e, s int, count bool) error {
	t0 := time.Now()
	if b.uploadFault != nil {
		if err := b.uploadFault(c.layer, e); err != nil {
			return fmt.Errorf("wgsl: expert streaming: upload of %s.%d: %w", c.name, e, err)
		}
	}
	_, gu, dn, err := c.pack(e, b.packGU, b.packDN)
	if err != nil {
		return err
	}
	b.packGU, b.packDN = gu, dn // the next miss packs into the same words
	if len(gu) != c.guWords || len(dn) != c.dnWords {
		return fmt.Errorf("wgsl: expert streaming: %s.%d packs to %d+%d words, its slots hold %d+%d", c.name, e, len(gu), len(dn), c.guWords, c.dnWords)
	}
	if err := c.w.GateUp.WriteU32(s*c.guWords, gu); err != nil {
		return fmt.Errorf("wgsl: expert streaming: upload of %s.%d: %w", c.name, e, err)
	}
	if err := c.w.Down.WriteU32(s*c.dnWords, dn); err != nil {
		return fmt.Errorf("wgsl: expert streaming: upload of %s.%d: %w", c.name, e, err)
	}
	if old := c.expOf[s]; old >= 0 {
		c.slotOf[old] = -1
	}
	c.expOf[s], c.slotOf[e] = int32(e), int32(s)
	if count {
		b.xstats.Misses++
		b.xstats.UploadBytes += 4 * int64(len(gu)+len(dn))
		b.xstats.UploadTime += time.Since(t0)
	}
	return nil
}

// slot returns expert e's slot for the current run, uploading it on a
// miss into the slot, among those no other expert of the run needs, whose
// expert has the smallest decayed routing count (freqDecay).
func (b *gpu) slot(c *expertCache, e int) (int, error) {
	if e < 0 || e >= len(c.slotOf) {
		return 0, fmt.Errorf("wgsl: expert streaming: %s: the router chose expert %d of %d", c.name, e, len(c.slotOf))
	}
	c.tick++
	c.freq[e], c.stamp[e] = c.count(e)+1, c.tick
	if s := int(c.slotOf[e]); s >= 0 {
		if c.pin[s] != c.run {
			b.xstats.Hits++
		}
		c.used[s], c.pin[s] = c.tick, c.run
		return s, nil
	}
	victim, low := -1, 0.0
	for s := range c.used {
		if c.pin[s] == c.run {
			continue
		}
		n := 0.0
		if x := c.expOf[s]; x >= 0 {
			n = c.count(int(x))
		}
		if victim < 0 || n < low || n == low && c.used[s] < c.used[victim] {
			victim, low = s, n
		}
	}
	if victim < 0 { // runs are cut to fit the slots (streamExperts)
		return 0, fmt.Errorf("wgsl: expert streaming: %s: no free slot of %d", c.name, len(c.used))
	}
	if err := b.fill(c, e, victim, true); err != nil {
		return 0, err
	}
	c.used[victim], c.pin[victim] = c.tick, c.run
	return victim, nil
}

// streamExperts is Experts for a streamed layer: the routed ids read back,
// then per run of tokens whose distinct experts fit the slots, their
// slots made resident, the id → slot table written and the experts run.
func (b *gpu) streamExperts(c *expertCache, out, x *gt, T int, idx, wts View, K int, accum bool,
	run func(out, x Strided, T int, w *GLUWeights, r Routing, accum bool)) {
	ids := b.idxHost[:T*K]
	if err := b.midRead(T, func() error { return b.d.ReadU32(idx, ids) }); err != nil {
		b.fail(fmt.Errorf("wgsl: expert streaming: read the routing of %s: %w", c.name, err))
		return
	}
	S := len(c.expOf)
	if T > 1 && expertMajor {
		c.run++
		c.list = c.list[:0]
		for _, e := range ids {
			if int(e) < len(c.mark) && c.mark[e] != c.run {
				c.mark[e] = c.run
				c.list = append(c.list, int32(e))
			}
		}
		if len(c.list) > S {
			b.streamByExpert(c, out, x, T, ids, wts, K, accum, run)
			return
		}
	}
	for t0 := 0; t0 < T && b.err == nil; {
		c.run++
		need, t1 := 0, t0
		for ; t1 < T; t1++ {
			n := 0
			for _, e := range ids[t1*K : (t1+1)*K] {
				if int(e) < len(c.mark) && c.mark[e] != c.run {
					n++
				}
			}
			if t1 > t0 && need+n > S {
				break
			}
			for _, e := range ids[t1*K : (t1+1)*K] {
				if int(e) < len(c.mark) && c.mark[e] != c.run {
					c.mark[e] = c.run
					need++
				}
			}
		}
		for i := t0 * K; i < t1*K; i++ {
			s, err := b.slot(c, int(ids[i]))
			if err != nil {
				b.fail(err)
				return
			}
			b.slotHost[i] = uint32(s)
		}
		if err := b.slotIdx.WriteU32(t0*K, b.slotHost[t0*K:t1*K]); err != nil {
			b.fail(fmt.Errorf("wgsl: expert streaming: %s: slot table: %w", c.name, err))
			return
		}
		run(Strided{View{out.v.Buf, out.v.Off + t0*out.stride}, out.stride}, Strided{View{x.v.Buf, x.v.Off + t0*x.stride}, x.stride},
			t1-t0, c.w, Routing{Idx: b.slotIdx.At(t0 * K), Wts: View{wts.Buf, wts.Off + t0*K}, K: K}, accum)
		t0 = t1
	}
}

// midRead runs a readback in the middle of a piece. A multi-token piece's
// work since the last wait (a layer of prefill, several seconds on a CPU
// driver) must not be waited for with the blocking poll, which gives up
// after 5 s while the work still runs (bug 5: a later SIGSEGV in lavapipe,
// seen with k3-mini's experts streamed): it polls instead.
func (b *gpu) midRead(T int, read func() error) error {
	if T > 1 {
		b.d.longWaits++
		defer func() { b.d.longWaits-- }()
	}
	return read()
}

// expertMajor: a prefill piece routing to more experts than the slots is
// run expert-major (streamByExpert) rather than in runs of tokens.
var expertMajor = true

// streamByExpert runs a piece whose tokens route to more distinct experts
// (c.list) than there are slots in passes over groups of at most S of
// them, those already resident first: each group's experts are made
// resident (each needed expert uploaded once per piece), and the whole
// piece runs against the slots with the routing weights of the other
// experts' entries set to 0, the passes after the first adding into out.
func (b *gpu) streamByExpert(c *expertCache, out, x *gt, T int, ids []uint32, wts View, K int, accum bool,
	run func(out, x Strided, T int, w *GLUWeights, r Routing, accum bool)) {
	wh := b.wtsHost[:T*K]
	if err := b.midRead(T, func() error { return b.d.ReadF32(wts, wh) }); err != nil {
		b.fail(fmt.Errorf("wgsl: expert streaming: read the routing weights of %s: %w", c.name, err))
		return
	}
	r := 0 // resident experts first: the first pass uploads nothing for them
	for i, e := range c.list {
		if c.slotOf[e] >= 0 {
			c.list[r], c.list[i] = e, c.list[r]
			r++
		}
	}
	S := len(c.expOf)
	for g0 := 0; g0 < len(c.list) && b.err == nil; g0 += S {
		c.run++
		for _, e := range c.list[g0:min(g0+S, len(c.list))] {
			if _, err := b.slot(c, int(e)); err != nil {
				b.fail(err)
				return
			}
			c.mark[e] = c.run
		}
		for i, e := range ids {
			b.slotHost[i], b.maskHost[i] = 0, 0
			if c.mark[e] == c.run {
				b.slotHost[i], b.maskHost[i] = uint32(c.slotOf[e]), wh[i]
			}
		}
		if err := b.slotIdx.WriteU32(0, b.slotHost[:T*K]); err != nil {
			b.fail(fmt.Errorf("wgsl: expert streaming: %s: slot table: %w", c.name, err))
			return
		}
		if err := b.maskWts.WriteF32(0, b.maskHost[:T*K]); err != nil {
			b.fail(fmt.Errorf("wgsl: expert streaming: %s: routing weights: %w", c.name, err))
			return
		}
		run(out.s(), x.s(), T, c.w, Routing{Idx: b.slotIdx.At(0), Wts: b.maskWts.At(0), K: K}, accum || g0 > 0)
	}
}
