package model

import (
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// What the model families share: the family a checkpoint binds to
// (qwen3next.go, deepseekv3.go; the Kimi family is k3.go), the router and
// RoPE a config describes, and the standard pre-norm decoder wiring.

// Head is the LM head (every family's: the Model holds it).
func (m *Model) Head() *tensor.Mat { return m.LMHead }

// declareTop lists the model-level weights every family has: the
// embedding, the LM head and the final norm.
func (m *Model) declareTop(u nn.Uploader) {
	u.Mats([]string{"model.embed_tokens.weight"}, m.EmbedTokens)
	u.Mats([]string{"lm_head.weight"}, m.LMHead)
	u.Vecs([]string{"model.norm.weight"}, m.Norm)
}

// input writes a piece's input rows into h: the embedding rows of the
// ids, or the given embeddings.
func input(b nn.Backend, h nn.Tensor, embed *tensor.Mat, in nn.Input, T int) {
	if in.Emb != nil {
		b.SetRows(h, in.Emb, T)
		return
	}
	b.Embed(h, embed, in.IDs)
}

// family binds the layers of a model that is not of the Kimi family
// (m.Family); the model-level tensors are bound by binder.model.
func (b *binder) family(m *Model) {
	switch m.Cfg.Layout {
	case config.LayoutQwen3Next:
		m.Family = b.qwen3Next(m)
	case config.LayoutDeepSeekV3:
		m.Family = b.deepSeekV3(m)
	}
}

// familyIgnorable reports checkpoint tensors a family's forward pass does
// not use: the multi-token-prediction heads (Qwen3-Next "mtp.*",
// DeepSeek-V3's layers from num_hidden_layers on), which transformers
// ignores too.
func familyIgnorable(cfg *config.Config, name string) bool {
	switch cfg.Layout {
	case config.LayoutQwen3Next:
		return strings.HasPrefix(name, "mtp.")
	case config.LayoutDeepSeekV3:
		rest, ok := strings.CutPrefix(name, "model.layers.")
		if !ok {
			return false
		}
		n, _, _ := strings.Cut(rest, ".")
		i, err := strconv.Atoi(n)
		return err == nil && i >= cfg.NumHiddenLayers
	}
	return false
}

// routerOf is the MoE router c describes (architecture.md §3.2–3.4).
func routerOf(c *config.Config) ref.Router {
	return ref.Router{TopK: c.TopK, Groups: c.NumExpertGroup, TopKGroups: c.TopKGroup, Softmax: c.SoftmaxRouter,
		Renormalize: c.Renormalize, RenormalizeAnyK: c.RenormalizeAnyK, Scale: c.RoutedScalingFactor}
}

// declareMoE declares an MoE block's weights (e: its name prefix) as
// nn.MoEBlock uses them: the products of its input stacked — the router,
// the latent down-projection, the shared experts' gate and up (one
// Linears) — then the latent up-projection and the shared experts' down
// projection, whose products add into the block's output together
// (LinearNormedGLU), the vectors and the routed experts.
func declareMoE(u nn.Uploader, e string, w *MoE) {
	var sg, su, sd *tensor.Mat
	if sh := w.SharedExperts; sh != nil {
		sg, su, sd = sh.GateProj, sh.UpProj, sh.DownProj
	}
	u.Mats(names(e, "gate", "routed_expert_down_proj", "shared_experts.gate_proj", "shared_experts.up_proj"),
		w.Gate, w.RoutedExpertDownProj, sg, su)
	u.Mats(names(e, "routed_expert_up_proj", "shared_experts.down_proj"), w.RoutedExpertUpProj, sd)
	u.Vecs(names(e, "gate.e_score_correction_bias"), w.EScoreCorrectionBias)
	u.Vecs(names(e, "routed_expert_norm"), w.RoutedExpertNorm)
	u.GLUs(e+"experts", w.Experts)
}

// sharedWidth is the widest shared expert's intermediate size among the
// layers' MoE blocks (moe(l), nil for none; 0: no shared expert), for
// nn.NewMoEScratch.
func sharedWidth[L any](layers []L, moe func(L) *MoE) int {
	n := 0
	for _, l := range layers {
		if w := moe(l); w != nil && w.SharedExperts != nil {
			n = max(n, w.SharedExperts.GateProj.Rows)
		}
	}
	return n
}

// ropeOf is the rotary embedding c describes (RotaryDim channels, base
// rope_theta, YaRN rope_scaling).
func ropeOf(c *config.Config) *ref.RoPE {
	var y *ref.YaRN
	if s := c.RopeScaling; s != nil {
		y = &ref.YaRN{Factor: s.Factor, OriginalMaxPos: s.OriginalMaxPositions, BetaFast: s.BetaFast, BetaSlow: s.BetaSlow,
			MScale: s.MScale, MScaleAllDim: s.MScaleAllDim, AttentionFactor: s.AttentionFactor, TruncateCorrDims: s.Truncate}
	}
	return ref.NewRoPE(c.RotaryDim, c.RopeTheta, c.RopeInterleave, y)
}

// blockDst is where a block (mixer, FFN) whose output goes into the
// residual dst — written (accum false) or added (accum true) by its output
// projection — writes: dst itself, or when tracing the scratch mix,
// written, so that the block's output can be traced (blockCommit).
func blockDst(b nn.Backend, mix, dst nn.Tensor, accum bool) (nn.Tensor, bool) {
	if nn.Tracing(b) {
		return mix, false
	}
	return dst, accum
}

// blockCommit ends a block started with blockDst: when tracing, the output
// in mix is traced as name, then written or added into dst.
func blockCommit(b nn.Backend, mix nn.Tensor, name string, i int, dst nn.Tensor, accum bool, T int) {
	if !nn.Tracing(b) {
		return
	}
	nn.Trace(b, name, i, mix, T)
	if accum {
		b.Add(dst, mix, T)
	} else {
		b.Copy(dst, mix, T)
	}
}

// prenorm is the standard pre-norm decoder (architecture.md §5.1) of the
// qwen3_next and deepseek_v3 families (and of Kimi models without Block
// AttnRes):
//
//	h = embed(ids)
//	per layer:  h += mixer(RMSNorm_in(h));  h += ffn(RMSNorm_post(h))
//	return RMSNorm_final(h)
//
// A family gives the per-layer norm weights and its mixer and FFN, each
// writing (accum false) or adding (accum true) its output into out from
// the normed input xn.
type prenorm struct {
	b            nn.Backend
	embed        *tensor.Mat
	in, post     [][]float32 // per layer input_layernorm, post_attention_layernorm
	final        []float32
	eps          float32
	h, xn, mix   nn.Tensor // the residual stream, the normed input, a traced block output [T, d]
	mixer, ffn   func(st nn.State, i int, out nn.Tensor, accum bool, T int)
	mixOp, ffnOp func(i int) nn.Op
}

func newPrenorm(b nn.Backend, maxT, d int) *prenorm {
	return &prenorm{b: b, h: b.Alloc(maxT, d), xn: b.Alloc(maxT, d), mix: b.Alloc(maxT, d)}
}

// Forward runs the decoder over a piece of T tokens and returns the final
// normed hidden states.
func (f *prenorm) Forward(st nn.State, in nn.Input, T int) nn.Tensor {
	b, h := f.b, f.h
	input(b, h, f.embed, in, T)
	for i := range f.in {
		nn.Trace(b, "layer_in", i, h, T)
		b.RMSNorm(f.xn, h, T, f.in[i], f.eps)
		t0 := nn.Tick(b)
		out, acc := blockDst(b, f.mix, h, true)
		f.mixer(st, i, out, acc, T)
		blockCommit(b, f.mix, "mixer_out", i, h, true, T)
		nn.Tock(b, f.mixOp(i), t0)
		nn.Trace(b, "ffn_in", i, h, T)
		b.RMSNorm(f.xn, h, T, f.post[i], f.eps)
		t0 = nn.Tick(b)
		out, acc = blockDst(b, f.mix, h, true)
		f.ffn(st, i, out, acc, T)
		blockCommit(b, f.mix, "ffn_out", i, h, true, T)
		nn.Tock(b, f.ffnOp(i), t0)
		nn.EndLayer(b, T)
	}
	b.RMSNorm(f.xn, h, T, f.final, f.eps)
	nn.Trace(b, "final_hidden", -1, f.xn, T)
	st.Advance(T)
	return f.xn
}
