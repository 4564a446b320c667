package model

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
)

// The DeepSeek-V3 family (model_type deepseek_v3): its weights, how a
// Hugging Face checkpoint binds to them, and its forward pass, written
// once over nn.Backend. Every layer is multi-head latent attention with
// decoupled RoPE and YaRN (architecture.md §2, §7.2; the Kimi family's
// mixer, mla.go, with the rotation switched on), then a dense SwiGLU MLP
// (the first first_k_dense_replace layers) or the noaux_tc MoE: sigmoid
// scores, the selection bias, group-limited top-k, routed_scaling_factor,
// unscaled shared experts (§3.2); pre-norm wiring (§5.1).

// DeepSeekV3 is a DeepSeek-V3 model's decoder layers (the embedding,
// final norm and LM head are the Model's).
type DeepSeekV3 struct {
	M      *Model
	Layers []*DeepSeekLayer
}

// DeepSeekLayer is one DeepSeek-V3 decoder layer: MLA, then MLP or MoE.
type DeepSeekLayer struct {
	InputLayernorm         []float32 // input_layernorm.weight [d]
	PostAttentionLayernorm []float32 // post_attention_layernorm.weight [d]
	MLA                    *MLA      // self_attn.*
	MLP                    *MLP      // mlp.{gate,up,down}_proj (dense layers)
	MoE                    *MoE      // mlp.gate{.weight,.e_score_correction_bias}, mlp.experts.{e}.*, mlp.shared_experts.*
}

// deepSeekV3 binds a DeepSeek-V3 checkpoint's layers.
func (b *binder) deepSeekV3(m *Model) *DeepSeekV3 {
	c := m.Cfg
	d := c.HiddenSize
	ds := &DeepSeekV3{M: m}
	for i := 0; i < c.NumHiddenLayers && b.Err == nil; i++ {
		p := fmt.Sprintf("model.layers.%d.", i)
		l := &DeepSeekLayer{
			InputLayernorm:         b.Vec(p+"input_layernorm.weight", d),
			PostAttentionLayernorm: b.Vec(p+"post_attention_layernorm.weight", d),
			MLA:                    b.mla(p+"self_attn.", c),
		}
		f := p + "mlp."
		if !c.IsMoE(i) {
			g := b.glu(f, "gate_proj", "up_proj", "down_proj", c.IntermediateSize, d)
			l.MLP = &g
		} else {
			E, I := c.NumExperts, c.MoEIntermediateSize
			moe := &MoE{Gate: b.Mat(f+"gate.weight", E, d), EScoreCorrectionBias: b.Vec(f+"gate.e_score_correction_bias", E),
				Experts: make([]MLP, E)}
			for e := range moe.Experts {
				moe.Experts[e] = b.glu(fmt.Sprintf("%sexperts.%d.", f, e), "gate_proj", "up_proj", "down_proj", I, d)
			}
			if n := c.NumSharedExperts; n > 0 {
				g := b.glu(f+"shared_experts.", "gate_proj", "up_proj", "down_proj", n*I, d)
				moe.SharedExperts = &g
			}
			l.MoE = moe
		}
		ds.Layers = append(ds.Layers, l)
	}
	return ds
}

// StateSpec: per layer the latent cache of rows [c_kv; k_r] (k_r rotated).
func (ds *DeepSeekV3) StateSpec() []nn.LayerState {
	c := ds.M.Cfg
	spec := make([]nn.LayerState, len(ds.Layers))
	for i := range spec {
		spec[i].CacheWidth = c.KVLoraRank + c.QKRopeHeadDim
	}
	return spec
}

// Declare lists the weights to u, grouped as the forward pass uses them.
func (ds *DeepSeekV3) Declare(u nn.Uploader) {
	ds.M.declareTop(u)
	for i, l := range ds.Layers {
		p := fmt.Sprintf("model.layers.%d.", i)
		u.Vecs(names(p, "input_layernorm.weight"), l.InputLayernorm)
		u.Vecs(names(p, "post_attention_layernorm.weight"), l.PostAttentionLayernorm)
		l.MLA.declare(u, p+"self_attn.")
		f := p + "mlp."
		if l.MLP != nil {
			u.GLUs(p+"mlp", one(l.MLP))
			continue
		}
		declareMoE(u, f, l.MoE)
	}
}

// deepSeekGraph is the DeepSeek-V3 forward pass bound to a backend and its
// scratch.
type deepSeekGraph struct {
	ds    *DeepSeekV3
	b     nn.Backend
	dec   *prenorm
	mla   mlaScratch
	rope  *ref.RoPE
	scale float32
	moe   *nn.MoEScratch
	moeA  nn.MoEArgs // kept here so that passing it allocates nothing
}

// Build allocates the forward pass's scratch on b for pieces of up to
// maxT tokens.
func (ds *DeepSeekV3) Build(b nn.Backend, maxT int) nn.Graph {
	c := ds.M.Cfg
	d, H := c.HiddenSize, c.NumHeads
	f := &deepSeekGraph{ds: ds, b: b, dec: newPrenorm(b, maxT, d), rope: ropeOf(c), scale: deepSeekScale(c.QKNopeHeadDim+c.QKRopeHeadDim, c.RopeScaling)}
	f.mla = mlaScratch{q: b.Alloc(maxT, H*(c.QKNopeHeadDim+c.QKRopeHeadDim)), qa: b.Alloc(maxT, max(c.QLoraRank, 1)),
		kva: b.Alloc(maxT, c.KVLoraRank+c.QKRopeHeadDim), o: b.Alloc(maxT, H*c.VHeadDim), tmp: b.Alloc(maxT, d),
		products: make([]nn.Product, 0, 4)}
	if c.NumExperts > 0 {
		f.moe = nn.NewMoEScratch(b, maxT, c.NumExperts, d, c.TopK, sharedWidth(ds.Layers, func(l *DeepSeekLayer) *MoE { return l.MoE }), f.mla.tmp)
	}
	dec := f.dec
	dec.embed, dec.final, dec.eps = ds.M.EmbedTokens, ds.M.Norm, c.RMSNormEps
	for _, l := range ds.Layers {
		dec.in = append(dec.in, l.InputLayernorm)
		dec.post = append(dec.post, l.PostAttentionLayernorm)
	}
	dec.mixer, dec.ffn = f.mixer, f.ffn
	dec.mixOp = func(int) nn.Op { return nn.OpMLA }
	dec.ffnOp = func(i int) nn.Op {
		if ds.Layers[i].MLP != nil {
			return nn.OpMLP
		}
		return nn.OpMoE
	}
	return f
}

// deepSeekScale is the MLA softmax scale: d_qk^−½, times mscale(s,
// mscale_all_dim)² under YaRN with mscale_all_dim set (transformers
// DeepseekV3Attention; architecture.md §2.4, §7.2).
func deepSeekScale(dqk int, y *config.RopeScaling) float32 {
	s := 1 / math.Sqrt(float64(dqk))
	if y != nil && y.MScaleAllDim != 0 {
		m := ref.YaRNMScale(y.Factor, y.MScaleAllDim)
		s *= m * m
	}
	return float32(s)
}

func (f *deepSeekGraph) Forward(st nn.State, in nn.Input, T int) nn.Tensor {
	return f.dec.Forward(st, in, T)
}

// mixer is layer i's MLA (mlaBlock) with q_rope and k_r rotated at their
// positions.
func (f *deepSeekGraph) mixer(st nn.State, i int, out nn.Tensor, accum bool, T int) {
	mlaBlock(f.b, &f.mla, f.ds.M.Cfg, f.ds.Layers[i].MLA, f.dec.xn, st.Cache(i), out, accum, T, f.rope, st.Pos(), f.scale)
}

// ffn is layer i's FFN: the dense SwiGLU MLP, or the noaux_tc MoE
// (nn.MoEBlock, architecture.md §3.2):
//
//	s = σ(gate·x);  selection by s + e_score_correction_bias within the topk_group best groups
//	w = s[idx] / Σ s[idx] · routed_scaling_factor
//	out (+)= Σ_k w_k SwiGLU_k(x) + SwiGLU_shared(x)
func (f *deepSeekGraph) ffn(_ nn.State, i int, out nn.Tensor, accum bool, T int) {
	c, l := f.ds.M.Cfg, f.ds.Layers[i]
	if l.MLP != nil {
		f.b.GLU(out, f.dec.xn, T, l.MLP, ref.Act{}, accum)
		return
	}
	f.moeA = nn.MoEArgs{Layer: i, Router: routerOf(c), Eps: c.RMSNormEps, S: f.moe}
	nn.MoEBlock(f.b, out, f.dec.xn, T, l.MoE, &f.moeA, accum)
}
