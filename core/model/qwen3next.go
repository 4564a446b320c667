package model

import (
	"fmt"
	"math"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// The Qwen3-Next family (model_type qwen3_next): its weights, how a Hugging
// Face checkpoint binds to them, and its forward pass, written once over
// nn.Backend. Layers are Gated DeltaNet (architecture.md §1.1–1.3) or gated
// grouped-query attention with partial RoPE (§2.5) with a dense SwiGLU MLP
// or a softmax-routed MoE plus a sigmoid-gated shared expert (§3.4), in
// the pre-norm wiring (§5.1). Every RMSNorm except the GDN output norm is
// zero-centred in the checkpoint (it scales by 1 + w); the binder adds the
// 1 once, so the forward pass uses plain RMSNorms.

// Qwen3Next is a Qwen3-Next model's decoder layers (the embedding, final
// norm and LM head are the Model's).
type Qwen3Next struct {
	M      *Model
	Layers []*QwenLayer
}

// QwenLayer is one Qwen3-Next decoder layer: GDN or Attn, MLP or MoE.
type QwenLayer struct {
	InputLayernorm         []float32 // 1 + input_layernorm.weight [d]
	PostAttentionLayernorm []float32 // 1 + post_attention_layernorm.weight [d]

	GDN  *GatedDeltaNet  // linear_attn.*
	Attn *GatedAttention // self_attn.*

	MLP              *MLP        // mlp.{gate,up,down}_proj (dense layers)
	MoE              *MoE        // mlp.gate, mlp.experts.{e}.{gate,up,down}_proj
	SharedExpert     *MLP        // mlp.shared_expert.* (nil if none)
	SharedExpertGate *tensor.Mat // mlp.shared_expert_gate.weight [1, d]
}

// GatedDeltaNet is one Gated DeltaNet mixer (linear_attn.*). The
// checkpoint's in_proj_qkvz and in_proj_ba are grouped per key head
// ([q_g; k_g; v_g; z_g] and [b_g; a_g] for each key head g); the binder
// regroups their rows once into the contiguous projections below.
type GatedDeltaNet struct {
	QKV    *tensor.Mat // [q; k; v] rows of in_proj_qkvz [2·Hk·dk + Hv·dv, d]: the conv input
	Z      *tensor.Mat // z rows of in_proj_qkvz [Hv·dv, d]: the output gate
	B, A   *tensor.Mat // b and a rows of in_proj_ba [Hv, d] each
	Conv1d []float32   // conv1d.weight [2·Hk·dk + Hv·dv, 1, K], over [q; k; v]
	DtBias []float32   // dt_bias [Hv], repeated over dk: [Hv·dk] (nn.KDAGate's layout)
	ALog   []float32   // A_log [Hv]
	Norm   []float32   // norm.weight [dv] (plain, not zero-centred)
	Out    *tensor.Mat // out_proj [d, Hv·dv]
}

// GatedAttention is one gated GQA mixer (self_attn.*). q_proj holds per
// head [query; gate]; the binder splits it into Q and Gate.
type GatedAttention struct {
	Q, Gate      *tensor.Mat // [H·hd, d] each
	K, V         *tensor.Mat // k_proj, v_proj [Hkv·hd, d]
	QNorm, KNorm []float32   // 1 + q_norm.weight, 1 + k_norm.weight [hd]
	O            *tensor.Mat // o_proj [d, H·hd]
}

// qwenZeroCentred reports the Qwen3-Next RMSNorm weights stored
// zero-centred (scaling by 1 + w): every norm but the GDN output norm.
func qwenZeroCentred(name string) bool {
	return strings.HasSuffix(name, "layernorm.weight") || strings.HasSuffix(name, "q_norm.weight") ||
		strings.HasSuffix(name, "k_norm.weight") || name == "model.norm.weight"
}

// plusOne adds 1 to a zero-centred norm weight.
func plusOne(w []float32) []float32 {
	for i := range w {
		w[i]++
	}
	return w
}

// qwenQKVZSpans are the row spans of in_proj_qkvz that make the
// projections QKV ([q; k; v]) and Z, and of in_proj_ba that make B and A:
// key head g's group holds q_g (dk), k_g (dk), v_g (r·dv), z_g (r·dv) and
// b_g (r), a_g (r), r = Hv/Hk (architecture.md §1.1).
func qwenQKVZSpans(c *config.Config) (qkv, z, b, a [][2]int) {
	Hk, dk, dv := c.LinearKeyHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	r := c.LinearValueHeads / Hk
	W := 2*dk + 2*r*dv
	part := func(off, n int) [][2]int {
		var s [][2]int
		for g := 0; g < Hk; g++ {
			s = append(s, [2]int{g*W + off, g*W + off + n})
		}
		return s
	}
	qkv = append(append(part(0, dk), part(dk, dk)...), part(2*dk, r*dv)...)
	z = part(2*dk+r*dv, r*dv)
	for g := 0; g < Hk; g++ {
		b = append(b, [2]int{2 * r * g, 2*r*g + r})
		a = append(a, [2]int{2*r*g + r, 2 * r * (g + 1)})
	}
	return qkv, z, b, a
}

// qwenQGateSpans are the row spans of q_proj that make the queries and the
// gates (per head h: query rows [2h·hd, (2h+1)·hd), gate rows the next hd).
func qwenQGateSpans(c *config.Config) (q, gate [][2]int) {
	hd := c.HeadDim
	for h := 0; h < c.NumHeads; h++ {
		q = append(q, [2]int{2 * h * hd, (2*h + 1) * hd})
		gate = append(gate, [2]int{(2*h + 1) * hd, (2*h + 2) * hd})
	}
	return q, gate
}

// regroup gathers each part's row spans of m into a matrix of its own
// (nil when only listing the spec).
func regroup(m *tensor.Mat, parts ...[][2]int) []*tensor.Mat {
	out := make([]*tensor.Mat, len(parts))
	for i, p := range parts {
		if m != nil {
			out[i] = m.GatherRows(p)
		}
	}
	return out
}

// qwen3Next binds a Qwen3-Next checkpoint's layers.
func (b *binder) qwen3Next(m *Model) *Qwen3Next {
	c := m.Cfg
	d := c.HiddenSize
	plusOne(m.Norm)
	q := &Qwen3Next{M: m}
	Hk, Hv, dk, dv, K := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim, c.ConvKernel
	kd, vd := Hk*dk, Hv*dv
	qkvS, zS, bS, aS := qwenQKVZSpans(c)
	qS, gS := qwenQGateSpans(c)
	for i := 0; i < c.NumHiddenLayers && b.Err == nil; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		l := &QwenLayer{
			InputLayernorm:         plusOne(b.Vec(p+"input_layernorm.weight", d)),
			PostAttentionLayernorm: plusOne(b.Vec(p+"post_attention_layernorm.weight", d)),
		}
		if c.Kinds[i] == config.GDN {
			a := p + "linear_attn."
			w := &GatedDeltaNet{}
			qkvz := regroup(b.Mat(a+"in_proj_qkvz.weight", 2*kd+2*vd, d), qkvS, zS)
			ba := regroup(b.Mat(a+"in_proj_ba.weight", 2*Hv, d), bS, aS)
			w.QKV, w.Z, w.B, w.A = qkvz[0], qkvz[1], ba[0], ba[1]
			w.Conv1d = b.Vec(a+"conv1d.weight", 2*kd+vd, 1, K)
			if bias := b.Vec(a+"dt_bias", Hv); bias != nil {
				w.DtBias = make([]float32, Hv*dk)
				ref.RepeatHeads(w.DtBias, bias, 1, Hv, dk, 1)
			}
			w.ALog = b.Vec(a+"A_log", Hv)
			w.Norm = b.Vec(a+"norm.weight", dv)
			w.Out = b.Mat(a+"out_proj.weight", d, vd)
			l.GDN = w
		} else {
			a := p + "self_attn."
			H, Hkv, hd := c.NumHeads, c.NumKVHeads, c.HeadDim
			qg := regroup(b.Mat(a+"q_proj.weight", 2*H*hd, d), qS, gS)
			l.Attn = &GatedAttention{Q: qg[0], Gate: qg[1],
				K: b.Mat(a+"k_proj.weight", Hkv*hd, d), V: b.Mat(a+"v_proj.weight", Hkv*hd, d),
				O:     b.Mat(a+"o_proj.weight", d, H*hd),
				QNorm: plusOne(b.Vec(a+"q_norm.weight", hd)), KNorm: plusOne(b.Vec(a+"k_norm.weight", hd))}
		}
		f := p + "mlp."
		if !c.IsMoE(i) {
			g := b.glu(f, "gate_proj", "up_proj", "down_proj", c.IntermediateSize, d)
			l.MLP = &g
		} else {
			moe := &MoE{Gate: b.Mat(f+"gate.weight", c.NumExperts, d), Experts: make([]MLP, c.NumExperts)}
			for e := range moe.Experts {
				moe.Experts[e] = b.glu(fmt.Sprintf("%sexperts.%d.", f, e), "gate_proj", "up_proj", "down_proj", c.MoEIntermediateSize, d)
			}
			l.MoE = moe
			if I := c.SharedExpertIntermediateSize; I > 0 {
				g := b.glu(f+"shared_expert.", "gate_proj", "up_proj", "down_proj", I, d)
				l.SharedExpert = &g
				l.SharedExpertGate = b.Mat(f+"shared_expert_gate.weight", 1, d)
			}
		}
		q.Layers = append(q.Layers, l)
	}
	return q
}

// The state tensors of a GDN layer, in StateSpec order.
const (
	gdnStateS = iota
	gdnStateConv
)

// StateSpec: per GDN layer the recurrent state S [Hv, dk, dv] and the conv
// tail [K−1, 2·Hk·dk + Hv·dv]; per attention layer the cache of rows
// [k; v] (2·Hkv·hd).
func (q *Qwen3Next) StateSpec() []nn.LayerState {
	c := q.M.Cfg
	spec := make([]nn.LayerState, len(q.Layers))
	conv := 2*c.LinearKeyHeads*c.LinearKeyHeadDim + c.LinearValueHeads*c.LinearValueHeadDim
	for i, l := range q.Layers {
		if l.GDN != nil {
			spec[i].Fixed = []int{c.LinearValueHeads * c.LinearKeyHeadDim * c.LinearValueHeadDim, (c.ConvKernel - 1) * conv}
		} else {
			spec[i].CacheWidth = 2 * c.NumKVHeads * c.HeadDim
		}
	}
	return spec
}

// Declare lists the weights to u, grouped as the forward pass uses them.
func (q *Qwen3Next) Declare(u nn.Uploader) {
	q.M.declareTop(u)
	for i, l := range q.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		u.Vecs(names(p, "input_layernorm.weight"), l.InputLayernorm)
		u.Vecs(names(p, "post_attention_layernorm.weight"), l.PostAttentionLayernorm)
		if w := l.GDN; w != nil {
			a := p + "linear_attn."
			u.Mats(names(a, "in_proj_qkvz.weight[qkv]", "in_proj_qkvz.weight[z]", "in_proj_ba.weight[b]", "in_proj_ba.weight[a]"),
				w.QKV, w.Z, w.B, w.A)
			u.Mats(names(a, "out_proj.weight"), w.Out)
			u.Vecs(names(a, "conv1d.weight"), w.Conv1d)
			u.Vecs(names(a, "dt_bias", "A_log"), w.DtBias, w.ALog)
			u.Vecs(names(a, "norm.weight"), w.Norm)
		} else {
			w, a := l.Attn, p+"self_attn."
			u.Mats(names(a, "q_proj.weight[q]", "q_proj.weight[gate]", "k_proj.weight", "v_proj.weight"), w.Q, w.Gate, w.K, w.V)
			u.Mats(names(a, "o_proj.weight"), w.O)
			u.Vecs(names(a, "q_norm.weight", "k_norm.weight"), w.QNorm, w.KNorm)
		}
		f := p + "mlp."
		if l.MLP != nil {
			u.GLUs(p+"mlp", one(l.MLP))
			continue
		}
		u.Mats(names(f, "gate.weight"), l.MoE.Gate)
		u.Mats(names(f, "shared_expert_gate.weight"), l.SharedExpertGate)
		u.GLUs(f+"experts", l.MoE.Experts)
		if l.SharedExpert != nil {
			u.GLUs(f+"shared_expert", one(l.SharedExpert))
		}
	}
}

// qwenGraph is the Qwen3-Next forward pass bound to a backend and its
// scratch.
type qwenGraph struct {
	q    *Qwen3Next
	b    nn.Backend
	dec  *prenorm
	rope *ref.RoPE
	// GDN: projections, conv output, q/k repeated to the value heads, v,
	// decays, delta-rule output
	qkv, z, beta, a, conv, qr, kr, v, g, o nn.Tensor
	// attention: projections, the rows [k; v] appended to the cache
	aq, agate, ak, av, kv, ao nn.Tensor
	// MoE: scratch, the shared expert's output and gate
	moe             *nn.MoEScratch
	shared, sg, sgd nn.Tensor
	tmp             nn.Tensor
	products        []nn.Product
	// op arguments, kept here so that passing them allocates nothing
	delta nn.DeltaArgs
	att   nn.AttnArgs
	moeA  nn.MoEArgs
}

// Build allocates the forward pass's scratch on b for pieces of up to
// maxT tokens.
func (q *Qwen3Next) Build(b nn.Backend, maxT int) nn.Graph {
	c := q.M.Cfg
	d := c.HiddenSize
	Hv, dk, dv := c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	kd, vd := c.LinearKeyHeads*dk, Hv*dv
	qh, kvh := c.NumHeads*c.HeadDim, c.NumKVHeads*c.HeadDim
	f := &qwenGraph{q: q, b: b, dec: newPrenorm(b, maxT, d), rope: ropeOf(c), tmp: b.Alloc(maxT, d),
		qkv: b.Alloc(maxT, 2*kd+vd), z: b.Alloc(maxT, vd), beta: b.Alloc(maxT, Hv), a: b.Alloc(maxT, Hv),
		conv: b.Alloc(maxT, 2*kd+vd), qr: b.Alloc(maxT, Hv*dk), kr: b.Alloc(maxT, Hv*dk), v: b.Alloc(maxT, vd),
		g: b.Alloc(maxT, Hv*dk), o: b.Alloc(maxT, vd),
		aq: b.Alloc(maxT, qh), agate: b.Alloc(maxT, qh), ak: b.Alloc(maxT, kvh), av: b.Alloc(maxT, kvh),
		kv: b.Alloc(maxT, 2*kvh), ao: b.Alloc(maxT, qh), products: make([]nn.Product, 0, 4)}
	if c.NumExperts > 0 {
		f.moe = nn.NewMoEScratch(b, maxT, c.NumExperts, d, c.TopK, 0, f.tmp) // its shared expert is its own (ffn)
		f.shared, f.sg, f.sgd = b.Alloc(maxT, d), b.Alloc(maxT, 1), b.Alloc(maxT, d)
	}
	dec := f.dec
	dec.embed, dec.final, dec.eps = q.M.EmbedTokens, q.M.Norm, c.RMSNormEps
	for _, l := range q.Layers {
		dec.in = append(dec.in, l.InputLayernorm)
		dec.post = append(dec.post, l.PostAttentionLayernorm)
	}
	dec.mixer, dec.ffn = f.mixer, f.ffn
	dec.mixOp = func(i int) nn.Op {
		if q.Layers[i].GDN != nil {
			return nn.OpGDN
		}
		return nn.OpAttn
	}
	dec.ffnOp = func(i int) nn.Op {
		if q.Layers[i].MLP != nil {
			return nn.OpMLP
		}
		return nn.OpMoE
	}
	return f
}

func (f *qwenGraph) Forward(st nn.State, in nn.Input, T int) nn.Tensor {
	return f.dec.Forward(st, in, T)
}

func (f *qwenGraph) mixer(st nn.State, i int, out nn.Tensor, accum bool, T int) {
	if l := f.q.Layers[i]; l.GDN != nil {
		f.gdn(st, i, l.GDN, out, accum, T)
	} else {
		f.attn(st, i, l.Attn, out, accum, T)
	}
}

// project computes the products of the normed input by ws (nn.Linears)
// into dsts and returns where each result is.
func (f *qwenGraph) project(T int, dsts [4]nn.Tensor, ws [4]*tensor.Mat) []nn.Product {
	ps := f.products[:0]
	for j, W := range ws {
		ps = append(ps, nn.Product{Out: dsts[j], X: f.dec.xn, W: W})
	}
	nn.Linears(f.b, T, ps)
	return ps
}

// gdn is one Gated DeltaNet mixer (architecture.md §1.2), run on the
// per-channel delta rule with each head's scalar decay broadcast over its
// dk key channels:
//
//	[q; k; v], z, b, a = projections of x
//	[q; k; v] = SiLU(conv([q; k; v]))            one causal depthwise conv
//	q, k repeated from Hk key heads to the Hv value heads (head h reads key head h/(Hv/Hk))
//	q = L2Norm(q)·dk^−½,  k = L2Norm(k),  β = σ(b)
//	g = −exp(A_log) ⊙ softplus(a + dt_bias)      per value head, broadcast over dk
//	o = DeltaRule(q, k, v, g, β; S)
//	out (+)= out_proj · (RMSNorm(o; norm) ⊙ SiLU(z))   per value head
func (f *qwenGraph) gdn(st nn.State, i int, w *GatedDeltaNet, out nn.Tensor, accum bool, T int) {
	c, b := f.q.M.Cfg, f.b
	Hk, Hv, dk, dv := c.LinearKeyHeads, c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	kd, r := Hk*dk, Hv/Hk
	ps := f.project(T, [4]nn.Tensor{f.qkv, f.z, f.beta, f.a}, [4]*tensor.Mat{w.QKV, w.Z, w.B, w.A})
	qkv, z, beta, a := ps[0].Out, ps[1].Out, ps[2].Out, ps[3].Out
	b.ShortConv(f.conv, qkv, T, w.Conv1d, st.Fixed(i, gdnStateConv), c.ConvKernel)
	b.Repeat(f.qr, b.Cols(f.conv, 0, kd), T, dk, r)
	b.Repeat(f.kr, b.Cols(f.conv, kd, kd), T, dk, r)
	b.Copy(f.v, b.Cols(f.conv, 2*kd, Hv*dv), T)
	b.L2Norm(f.qr, T, dk, 1e-6, float32(1/math.Sqrt(float64(dk))))
	b.L2Norm(f.kr, T, dk, 1e-6, 1)
	b.Sigmoid(beta, T)
	b.Repeat(f.g, a, T, 1, dk)
	b.KDAGate(f.g, T, nn.KDAGateArgs{H: Hv, DK: dk, DtBias: w.DtBias, ALog: w.ALog})
	f.delta = nn.DeltaArgs{T: T, H: Hv, DK: dk, DV: dv, Q: f.qr, K: f.kr, V: f.v, G: f.g, Beta: beta, O: f.o,
		S: st.Fixed(i, gdnStateS)}
	b.DeltaRule(&f.delta)
	nn.LinearGatedNorm(b, out, accum, f.o, z, T, w.Out, w.Norm, c.RMSNormEps, ref.GateSiLU, f.tmp)
}

// attn is one gated attention mixer (architecture.md §2.5):
//
//	q, gate, k, v = projections of x              (q_proj split per head into query and gate)
//	q = RMSNorm(q; 1+q_norm), k = RMSNorm(k; 1+k_norm)   per head
//	q, k ← partial RoPE (first head_dim·partial_rotary_factor channels, rotate-half pairs)
//	[k; v] appended to the cache
//	o = causal softmax(q·kᵀ / √hd) v               GQA: query head h reads KV head h/(H/Hkv)
//	out (+)= o_proj · (o ⊙ σ(gate))
func (f *qwenGraph) attn(st nn.State, i int, w *GatedAttention, out nn.Tensor, accum bool, T int) {
	c, b := f.q.M.Cfg, f.b
	H, Hkv, hd := c.NumHeads, c.NumKVHeads, c.HeadDim
	kw := Hkv * hd
	ps := f.project(T, [4]nn.Tensor{f.aq, f.agate, f.ak, f.av}, [4]*tensor.Mat{w.Q, w.Gate, w.K, w.V})
	q, gate, k, v := ps[0].Out, ps[1].Out, ps[2].Out, ps[3].Out
	b.RMSNorm(q, q, T, w.QNorm, c.RMSNormEps)
	b.RMSNorm(k, k, T, w.KNorm, c.RMSNormEps)
	b.RoPE(q, T, nn.RoPEArgs{Heads: H, Stride: hd, Pos0: st.Pos(), Rope: f.rope})
	b.RoPE(k, T, nn.RoPEArgs{Heads: Hkv, Stride: hd, Pos0: st.Pos(), Rope: f.rope})
	b.Copy(b.Cols(f.kv, 0, kw), k, T)
	b.Copy(b.Cols(f.kv, kw, kw), v, T)
	cache := st.Cache(i)
	b.Append(cache, f.kv, T)
	f.att = nn.AttnArgs{T: T, H: H, HKV: Hkv, D: hd, Scale: float32(1 / math.Sqrt(float64(hd))), Q: q, O: f.ao, Cache: cache}
	b.Attention(&f.att)
	b.SigmoidGate(f.ao, gate, T)
	nn.Project(b, out, f.ao, T, w.O, accum, f.tmp)
}

// ffn is layer i's FFN (architecture.md §3.4): the dense SwiGLU MLP, or
//
//	p = softmax(gate·x) over the experts;  top-k, renormalised (norm_topk_prob)
//	out (+)= Σ_k w_k SwiGLU_k(x) + σ(shared_expert_gate·x) · SwiGLU_shared(x)
func (f *qwenGraph) ffn(_ nn.State, i int, out nn.Tensor, accum bool, T int) {
	c, b, l := f.q.M.Cfg, f.b, f.q.Layers[i]
	xn, act := f.dec.xn, ref.Act{}
	if l.MLP != nil {
		b.GLU(out, xn, T, l.MLP, act, accum)
		return
	}
	f.moeA = nn.MoEArgs{Layer: i, Router: routerOf(c), Act: act, Eps: c.RMSNormEps, S: f.moe}
	nn.MoEBlock(b, out, xn, T, l.MoE, &f.moeA, accum)
	if l.SharedExpert == nil {
		return
	}
	b.GLU(f.shared, xn, T, l.SharedExpert, act, false)
	b.Linear(f.sg, xn, T, l.SharedExpertGate)
	b.Repeat(f.sgd, f.sg, T, 1, c.HiddenSize)
	b.SigmoidGate(f.shared, f.sgd, T)
	b.Add(out, f.shared, T)
}
