package model

import (
	"fmt"
	"math"
	"unsafe"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// The K3 family (Kimi Linear, Kimi K3): its forward pass, written once
// over nn.Backend for every backend. Equations: architecture.md §1.6
// (KDA), §2 (gated MLA), §3 (dense GLU, (Latent)MoE), §4.3 (Block
// AttnRes), §5.1 (wiring).

// The methods of nn.Model below hand over to m.Family when the model is
// of another family (family.go).

// StateSpec is the K3 sequence state: per KDA layer the recurrent state
// S [H, dk, dv] and the conv tails of q, k, v ([K−1, H·dk] each); per MLA
// layer the latent cache of rows [c_kv; k_r].
func (m *Model) StateSpec() []nn.LayerState {
	if m.Family != nil {
		return m.Family.StateSpec()
	}
	c := m.Cfg
	hd := c.KDAHeads * c.KDAHeadDim
	tail := (c.ConvKernel - 1) * hd
	spec := make([]nn.LayerState, len(m.Layers))
	for i, l := range m.Layers {
		if l.Kind == config.KDA {
			spec[i].Fixed = []int{c.KDAHeads * c.KDAHeadDim * c.KDAHeadDim, tail, tail, tail}
		} else {
			spec[i].CacheWidth = c.KVLoraRank + c.QKRopeHeadDim
		}
	}
	return spec
}

// The state tensors of a KDA layer, in StateSpec order.
const (
	stateS = iota
	stateConvQ
	stateConvK
	stateConvV
)

// inputs are the KDA projections of the normed input, computed together
// (nn.Linears; a backend stacks them as declared): q, k, v, β, f_a and the
// output gate (g_proj, or g_a_proj of the low-rank gate).
func (w *KDA) inputs() [7]*tensor.Mat {
	return [7]*tensor.Mat{w.QProj, w.KProj, w.VProj, w.BProj, w.FAProj, w.GProj, w.GAProj}
}

// one is a dense GLU as a one-element slice (same element).
func one(g *MLP) []MLP { return unsafe.Slice(g, 1) }

// Declare lists the weights to u, grouped as the forward pass uses them.
func (m *Model) Declare(u nn.Uploader) {
	if m.Family != nil {
		m.Family.Declare(u)
		return
	}
	m.declareTop(u)
	u.Vecs([]string{"model.output_attn_res_proj.weight"}, m.OutputAttnResProj)
	u.Vecs([]string{"model.output_attn_res_norm.weight"}, m.OutputAttnResNorm)
	for i, l := range m.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		u.Vecs([]string{p + "input_layernorm.weight"}, l.InputLayernorm)
		u.Vecs([]string{p + "post_attention_layernorm.weight"}, l.PostAttentionLayernorm)
		for _, v := range []struct {
			n string
			v []float32
		}{{"self_attention_res_proj", l.SelfAttentionResProj}, {"self_attention_res_norm", l.SelfAttentionResNorm},
			{"mlp_res_proj", l.MLPResProj}, {"mlp_res_norm", l.MLPResNorm}} {
			u.Vecs([]string{p + v.n + ".weight"}, v.v)
		}
		a := p + "self_attn."
		switch {
		case l.KDA != nil:
			w := l.KDA
			in := w.inputs()
			u.Mats(names(a, "q_proj", "k_proj", "v_proj", "b_proj", "f_a_proj", "g_proj", "g_a_proj"), in[:]...)
			u.Mats(names(a, "f_b_proj"), w.FBProj)
			u.Mats(names(a, "g_b_proj"), w.GBProj)
			u.Mats(names(a, "o_proj"), w.OProj)
			u.Vecs(names(a, "dt_bias", "A_log"), w.DtBias, w.ALog)
			u.Vecs(names(a, "q_conv1d", "k_conv1d", "v_conv1d"), w.QConv1d, w.KConv1d, w.VConv1d)
			u.Vecs(names(a, "o_norm"), w.ONorm)
		case l.MLA != nil:
			l.MLA.declare(u, a)
		}
		switch {
		case l.MLP != nil:
			u.GLUs(p+"mlp", one(l.MLP))
		case l.MoE != nil:
			declareMoE(u, p+"block_sparse_moe.", l.MoE)
		}
	}
}

func names(prefix string, ns ...string) []string {
	for i, n := range ns {
		ns[i] = prefix + n
	}
	return ns
}

// k3 is the K3 forward pass bound to a backend and its scratch, sized for
// pieces of up to maxT tokens.
type k3 struct {
	m *Model
	b nn.Backend

	dec      *prenorm    // plain residuals: the standard pre-norm decoder
	slots    []nn.Tensor // Block AttnRes: completed blocks, then the partial sum p, each [T, d]
	srcs     []nn.Tensor
	xn, tmp  nn.Tensor // normed input, block output [T, d]
	mix      nn.Tensor // a block's output when tracing [T, d]
	proj     [7]nn.Tensor
	qkvc     nn.Tensor // the conv outputs of q, k, v: [3·maxT, H·dk]
	maxT     int
	g, o     nn.Tensor
	qa, kva  nn.Tensor
	moe      *nn.MoEScratch
	products []nn.Product
	// op arguments, kept here so that passing them allocates nothing
	conv  nn.ConvArgs
	gate  nn.GateProj
	delta nn.DeltaArgs
	mlaS  mlaScratch
	moeA  nn.MoEArgs
}

// Build allocates the forward pass's scratch on b.
func (m *Model) Build(b nn.Backend, maxT int) nn.Graph {
	if m.Family != nil {
		return m.Family.Build(b, maxT)
	}
	c := m.Cfg
	d := c.HiddenSize
	f := &k3{m: m, b: b, maxT: maxT, tmp: b.Alloc(maxT, d)}
	if S := c.AttnResBlockSize; S > 0 {
		f.xn, f.mix = b.Alloc(maxT, d), b.Alloc(maxT, d)
		// token-major: token t's slots side by side, so a backend reads
		// one token's sources with one stride
		n := (c.NumHiddenLayers+S-1)/S + 1
		all := b.Alloc(maxT, n*d)
		for i := 0; i < n; i++ {
			f.slots = append(f.slots, b.Cols(all, i*d, d))
		}
		f.srcs = make([]nn.Tensor, 0, n)
	} else {
		f.dec = newPrenorm(b, maxT, d)
		f.xn, f.mix = f.dec.xn, f.dec.mix
		f.dec.embed, f.dec.final, f.dec.eps = m.EmbedTokens, m.Norm, c.RMSNormEps
		for _, l := range m.Layers {
			f.dec.in = append(f.dec.in, l.InputLayernorm)
			f.dec.post = append(f.dec.post, l.PostAttentionLayernorm)
		}
		f.dec.mixer, f.dec.mixOp = f.mixer, f.mixOp
		f.dec.ffn = func(_ nn.State, i int, out nn.Tensor, accum bool, T int) { f.ffn(i, m.Layers[i], out, accum, T) }
		f.dec.ffnOp = f.ffnOp
	}
	// the projections' outputs, each as wide as its widest use
	var width [7]int
	for _, l := range m.Layers {
		if l.KDA != nil {
			for j, W := range l.KDA.inputs() {
				if W != nil {
					width[j] = max(width[j], W.Rows)
				}
			}
			if W := l.KDA.GBProj; W != nil {
				width[5] = max(width[5], W.Rows)
			}
		}
		if w := l.MLA; w != nil { // q in proj[0], the gate in proj[1]
			width[0] = max(width[0], c.NumHeads*(c.QKNopeHeadDim+c.QKRopeHeadDim))
			if w.GProj != nil {
				width[1] = max(width[1], w.GProj.Rows)
			}
		}
	}
	for i := range f.proj {
		f.proj[i] = b.Alloc(maxT, max(width[i], 1))
	}
	hd := max(c.KDAHeads*c.KDAHeadDim, c.NumHeads*c.VHeadDim, 1)
	f.qkvc = b.Alloc(3*maxT, max(c.KDAHeads*c.KDAHeadDim, 1))
	f.g, f.o = b.Alloc(maxT, max(c.KDAHeads*c.KDAHeadDim, 1)), b.Alloc(maxT, hd)
	f.qa = b.Alloc(maxT, max(c.QLoraRank, 1))
	f.kva = b.Alloc(maxT, c.KVLoraRank+c.QKRopeHeadDim)
	if c.NumExperts > 0 {
		f.moe = nn.NewMoEScratch(b, maxT, c.NumExperts, c.ExpertWidth(), c.TopK, sharedWidth(m.Layers, func(l *Layer) *MoE { return l.MoE }), f.tmp)
	}
	f.products = make([]nn.Product, 0, 8)
	return f
}

// Forward runs the decoder over a piece of T tokens (architecture.md §5.1):
// per layer h += mixer(norm(h)); h += ffn(norm(h)) (prenorm), or with
// Block AttnRes (§4.3) each block's input read from the completed block
// summaries and the running partial sum; then the final norm.
func (f *k3) Forward(st nn.State, in nn.Input, T int) nn.Tensor {
	if f.dec != nil {
		return f.dec.Forward(st, in, T)
	}
	m, c, b := f.m, f.m.Cfg, f.b
	eps := c.RMSNormEps
	xn := f.xn
	// Block AttnRes: slot b < nb holds completed block b, slot nb the
	// partial sum p (when havePart); starting a block makes the next slot
	// the new partial sum, so "block nb := p" copies nothing.
	S := c.AttnResBlockSize
	input(b, f.slots[0], m.EmbedTokens, in, T)
	nb, havePart := 0, true
	for i, l := range m.Layers {
		t0 := nn.Tick(b)
		if nb > 0 {
			f.attnRes(nb+b2i(havePart), l.SelfAttentionResProj, l.SelfAttentionResNorm, l.InputLayernorm, T)
		} else {
			nn.Trace(b, "layer_in", i, f.slots[0], T)
			b.RMSNorm(xn, f.slots[0], T, l.InputLayernorm, eps)
		}
		nn.Tock(b, nn.OpAttnRes, t0)
		if nb > 0 {
			nn.Trace(b, "layer_in", i, f.tmp, T)
		}
		if i%S == 0 {
			nb++
			havePart = false
		}
		p := f.slots[nb]
		out, acc := f.dst(p, havePart)
		t0 = nn.Tick(b)
		f.mixer(st, i, out, acc, T)
		nn.Tock(b, f.mixOp(i), t0)
		f.commit("mixer_out", i, p, havePart, T)
		havePart = true
		t0 = nn.Tick(b)
		f.attnRes(nb+1, l.MLPResProj, l.MLPResNorm, l.PostAttentionLayernorm, T)
		nn.Tock(b, nn.OpAttnRes, t0)
		nn.Trace(b, "ffn_in", i, f.tmp, T)
		out, acc = f.dst(p, true)
		t0 = nn.Tick(b)
		f.ffn(i, l, out, acc, T)
		nn.Tock(b, f.ffnOp(i), t0)
		f.commit("ffn_out", i, p, true, T)
		nn.EndLayer(b, T)
	}
	f.attnRes(nb+1, m.OutputAttnResProj, m.OutputAttnResNorm, m.Norm, T)
	nn.Trace(b, "final_hidden", -1, xn, T)
	st.Advance(T)
	return xn
}

// attnRes is xn = RMSNorm(AttnRes(slots[:n]; w, γ); norm) (the AttnRes
// value itself left in tmp by the unfused form, for traces).
func (f *k3) attnRes(n int, w, gamma, norm []float32, T int) {
	eps := f.m.Cfg.RMSNormEps
	f.srcs = append(f.srcs[:0], f.slots[:n]...)
	nn.AttnResNorm(f.b, f.xn, f.srcs, T, w, gamma, eps, norm, eps, f.tmp)
}

func b2i(v bool) int {
	if v {
		return 1
	}
	return 0
}

// dst is where a block writes its output into the residual dst
// (blockDst).
func (f *k3) dst(dst nn.Tensor, accum bool) (nn.Tensor, bool) {
	return blockDst(f.b, f.mix, dst, accum)
}

// commit ends a block started with dst (blockCommit).
func (f *k3) commit(name string, i int, dst nn.Tensor, accum bool, T int) {
	blockCommit(f.b, f.mix, name, i, dst, accum, T)
}

// mixer is layer i's KDA or MLA mixer.
func (f *k3) mixer(st nn.State, i int, out nn.Tensor, accum bool, T int) {
	if l := f.m.Layers[i]; l.KDA != nil {
		f.kda(st, i, l.KDA, out, accum, T)
	} else {
		f.mla(st.Cache(i), l.MLA, out, accum, T)
	}
}

// mixOp and ffnOp are the profile ops of layer i's mixer and FFN.
func (f *k3) mixOp(i int) nn.Op {
	if f.m.Layers[i].KDA != nil {
		return nn.OpKDA
	}
	return nn.OpMLA
}

func (f *k3) ffnOp(i int) nn.Op {
	if f.m.Layers[i].MLP != nil {
		return nn.OpMLP
	}
	return nn.OpMoE
}

// kda is one KDA mixer (architecture.md §1.6):
//
//	q, k, v, β, f_a, g_out = projections of x
//	q = L2Norm(SiLU(conv(q)))·dk^−½, k = L2Norm(SiLU(conv(k))), v = SiLU(conv(v)), β = σ(β)
//	g = KDAGate(f_b·f_a)                       per-channel log decay
//	o = DeltaRule(q, k, v, g, β; S)            (conv to here: nn.KDAStep)
//	out (+)= o_proj · (RMSNorm(o; o_norm) ⊙ σ(g_out))   per head
//
// with g_out = g_proj·x, or g_b·(g_a·x) for the low-rank gate.
func (f *k3) kda(st nn.State, i int, w *KDA, out nn.Tensor, accum bool, T int) {
	c, b := f.m.Cfg, f.b
	H, dk := c.KDAHeads, c.KDAHeadDim
	hd := H * dk
	ps := f.products[:0]
	for j, W := range w.inputs() {
		var dst nn.Tensor
		if W != nil {
			dst = b.Reshape(f.proj[j], W.Rows)
		}
		ps = append(ps, nn.Product{Out: dst, X: f.xn, W: W})
	}
	nn.Linears(b, T, ps)
	q, k, v, beta, fa := ps[0].Out, ps[1].Out, ps[2].Out, ps[3].Out, ps[4].Out
	gate := ps[5].Out
	qc := b.Reshape(f.qkvc, hd)
	kc, vc := b.Rows(qc, f.maxT), b.Rows(qc, 2*f.maxT)
	f.conv = nn.ConvArgs{T: T, H: H, DK: dk, Kernel: c.ConvKernel, QScale: float32(1 / math.Sqrt(float64(dk))), Eps: 1e-6,
		Q: q, K: k, V: v, Beta: beta, QC: qc, KC: kc, VC: vc, WQ: w.QConv1d, WK: w.KConv1d, WV: w.VConv1d,
		TailQ: st.Fixed(i, stateConvQ), TailK: st.Fixed(i, stateConvK), TailV: st.Fixed(i, stateConvV)}
	g := b.Reshape(f.g, hd)
	f.gate = nn.GateProj{G: g, X: fa, W: w.FBProj, Args: nn.KDAGateArgs{H: H, DK: dk, DtBias: w.DtBias, ALog: w.ALog,
		Bounded: c.GateBounded, LowerBound: c.GateLowerBound}}
	f.conv.Gate = &f.gate
	o := b.Reshape(f.o, hd)
	f.delta = nn.DeltaArgs{T: T, H: H, DK: dk, DV: dk, Q: qc, K: kc, V: vc, G: g, Beta: beta, O: o, S: st.Fixed(i, stateS)}
	nn.KDAStep(b, &f.conv, &f.delta)
	if w.GProj == nil { // the low-rank gate's second product
		gate = b.Reshape(f.proj[5], w.GBProj.Rows)
		b.Linear(gate, ps[6].Out, T, w.GBProj)
	}
	nn.LinearGatedNorm(b, out, accum, o, gate, T, w.OProj, w.ONorm, c.RMSNormEps, ref.GateSigmoid, f.tmp)
}

// mla is one gated MLA mixer (architecture.md §2; NoPE: mlaBlock with
// no rotation):
//
//	q = q_proj·x, or q_b·RMSNorm(q_a·x)
//	[c_kv; k_r] = kv_a_proj_with_mqa·x, c_kv = RMSNorm(c_kv)   appended to the cache
//	o = attention of q over the cache (values through kv_b_proj)
//	out (+)= o_proj · (o ⊙ σ(g_proj·x))                       (gate if present)
func (f *k3) mla(cache nn.Cache, w *MLA, out nn.Tensor, accum bool, T int) {
	c := f.m.Cfg
	f.mlaS = mlaScratch{q: f.proj[0], qa: f.qa, kva: f.kva, gate: f.proj[1], o: f.o, tmp: f.tmp, products: f.products}
	mlaBlock(f.b, &f.mlaS, c, w, f.xn, cache, out, accum, T, nil, 0, float32(1/math.Sqrt(float64(c.QKNopeHeadDim+c.QKRopeHeadDim))))
}

// ffn is layer i's FFN: a dense GLU or the (Latent)MoE block (§3).
func (f *k3) ffn(i int, l *Layer, out nn.Tensor, accum bool, T int) {
	c := f.m.Cfg
	act := actOf(c)
	if l.MLP != nil {
		f.b.GLU(out, f.xn, T, l.MLP, act, accum)
		return
	}
	f.moeA = nn.MoEArgs{Layer: i, Act: act, Eps: c.RMSNormEps, S: f.moe,
		Router: routerOf(c)}
	nn.MoEBlock(f.b, out, f.xn, T, l.MoE, &f.moeA, accum)
}

// actOf is the GLU activation of c (SiLU, or SiTU with its betas).
func actOf(c *config.Config) ref.Act {
	return ref.Act{SiTU: c.SiTU, Beta: c.SiTUBeta, BetaLin: c.SiTULinearBeta}
}
