package gguf

import "github.com/tessera-llm/tessera/core/config"

// This file is the one table of names: how each tessera (Hugging Face)
// tensor becomes a llama.cpp tensor, and which hyperparameter keys are
// written, for llama.cpp's kimi-k3 and kimi-linear architectures
// (conversion/kimi_k3.py, conversion/kimi_linear.py, src/models/kimi-k3.cpp,
// src/models/kimi-linear.cpp, gguf-py/gguf/constants.py of llama.cpp
// 0ad4a86's era), its qwen3next (src/models/qwen3next.cpp; the converter's
// Qwen3NextModel) and its deepseek2 (src/models/deepseek2.cpp; the
// converter's DeepseekV2Model).

// Architecture names as llama.cpp spells them (general.architecture).
const (
	ArchKimiK3     = "kimi-k3"
	ArchKimiLinear = "kimi-linear"
	ArchQwen3Next  = "qwen3next"
	ArchDeepSeek2  = "deepseek2"
)

// family is a set of model families a rule or key applies to; the zero
// value is the Kimi family (kimi-k3, kimi-linear).
type family uint8

const (
	famKimi family = 1 << iota
	famQwen3Next
	famDeepSeek2
	famAll = famKimi | famQwen3Next | famDeepSeek2
)

// has reports whether f includes g (the zero f is famKimi).
func (f family) has(g family) bool {
	if f == 0 {
		f = famKimi
	}
	return f&g != 0
}

// familyOf is the rule family of an architecture.
func familyOf(arch string) family {
	switch arch {
	case ArchQwen3Next:
		return famQwen3Next
	case ArchDeepSeek2:
		return famDeepSeek2
	}
	return famKimi
}

// convOp is how a rule turns checkpoint tensors into a GGUF tensor.
type convOp int

const (
	// opCopy keeps the data; the shape is reversed into ggml order.
	opCopy convOp = iota
	// opConv1d stores a depthwise conv [C, 1, K] as ne [K, 1, C, 1].
	opConv1d
	// opALog stores ssm_a = −exp(A_log), one value per head.
	opALog
	// opResScore folds <x>_res_norm ⊙ <x>_res_proj into one [d] vector.
	opResScore
	// opSplitKVB splits kv_b_proj into attn_k_b (transposed) and attn_v_b.
	opSplitKVB
	// opExperts stacks experts.{e}.wN into one [.., .., E] tensor.
	opExperts
	// opPlusOne stores a zero-centred norm weight w as 1 + w (Qwen3-Next's
	// RMSNorms scale by 1 + w; llama.cpp's by w).
	opPlusOne
	// opConv2D stores a depthwise conv [C, 1, K] as ne [K, C].
	opConv2D
	// opFlat stores a [1, n] matrix as the vector ne [n].
	opFlat
)

// layerOnly restricts a rule to one kind of token mixer.
type layerOnly int

const (
	anyLayer layerOnly = iota
	kdaOnly
	mlaOnly
)

// rule maps one tessera tensor to GGUF. Per-layer names are relative to
// "model.layers.{i}." and "blk.{i}."; "*" in hf stands for the expert
// index. pair is the second input of opResScore.
type rule struct {
	hf   string
	only layerOnly
	gguf string
	op   convOp
	pair string
	fam  family
}

// modelRules map the tensors outside the decoder layers.
var modelRules = []rule{
	{hf: "model.embed_tokens.weight", gguf: "token_embd.weight", fam: famAll},
	{hf: "model.norm.weight", gguf: "output_norm.weight", fam: famKimi | famDeepSeek2},
	{hf: "model.norm.weight", gguf: "output_norm.weight", op: opPlusOne, fam: famQwen3Next},
	{hf: "lm_head.weight", gguf: "output.weight", fam: famAll},
	{hf: "model.output_attn_res_norm.weight", gguf: "output_res_score.weight", op: opResScore, pair: "model.output_attn_res_proj.weight"},
}

// layerRules map the tensors of decoder layer i.
var layerRules = []rule{
	{hf: "input_layernorm.weight", gguf: "attn_norm.weight", fam: famKimi | famDeepSeek2},
	{hf: "post_attention_layernorm.weight", gguf: "ffn_norm.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attention_res_norm.weight", gguf: "attn_res_score.weight", op: opResScore, pair: "self_attention_res_proj.weight"},
	{hf: "mlp_res_norm.weight", gguf: "ffn_res_score.weight", op: opResScore, pair: "mlp_res_proj.weight"},

	// Both mixers: q_proj is the KDA query and the MLA query without q_lora.
	{hf: "self_attn.q_proj.weight", gguf: "attn_q.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.o_proj.weight", gguf: "attn_output.weight", fam: famKimi | famDeepSeek2},

	// KDA.
	{hf: "self_attn.k_proj.weight", only: kdaOnly, gguf: "attn_k.weight"},
	{hf: "self_attn.v_proj.weight", only: kdaOnly, gguf: "attn_v.weight"},
	{hf: "self_attn.q_conv1d.weight", only: kdaOnly, gguf: "ssm_conv1d_q.weight", op: opConv1d},
	{hf: "self_attn.k_conv1d.weight", only: kdaOnly, gguf: "ssm_conv1d_k.weight", op: opConv1d},
	{hf: "self_attn.v_conv1d.weight", only: kdaOnly, gguf: "ssm_conv1d_v.weight", op: opConv1d},
	{hf: "self_attn.f_a_proj.weight", only: kdaOnly, gguf: "ssm_f_a.weight"},
	{hf: "self_attn.f_b_proj.weight", only: kdaOnly, gguf: "ssm_f_b.weight"},
	{hf: "self_attn.b_proj.weight", only: kdaOnly, gguf: "ssm_beta.weight"},
	{hf: "self_attn.A_log", only: kdaOnly, gguf: "ssm_a", op: opALog},
	{hf: "self_attn.dt_bias", only: kdaOnly, gguf: "ssm_dt.bias"},
	{hf: "self_attn.g_a_proj.weight", only: kdaOnly, gguf: "ssm_g_a.weight"},
	{hf: "self_attn.g_b_proj.weight", only: kdaOnly, gguf: "ssm_g_b.weight"},
	{hf: "self_attn.g_proj.weight", only: kdaOnly, gguf: "ssm_g.weight"},
	{hf: "self_attn.o_norm.weight", only: kdaOnly, gguf: "ssm_norm.weight"},

	// MLA (served by llama.cpp as MQA over the latent: kv_b is split);
	// DeepSeek-V3's too (q_proj and o_proj above).
	{hf: "self_attn.q_a_proj.weight", only: mlaOnly, gguf: "attn_q_a.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.q_a_layernorm.weight", only: mlaOnly, gguf: "attn_q_a_norm.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.q_b_proj.weight", only: mlaOnly, gguf: "attn_q_b.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.kv_a_proj_with_mqa.weight", only: mlaOnly, gguf: "attn_kv_a_mqa.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.kv_a_layernorm.weight", only: mlaOnly, gguf: "attn_kv_a_norm.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.kv_b_proj.weight", only: mlaOnly, gguf: "attn_k_b.weight", op: opSplitKVB, pair: "attn_v_b.weight", fam: famKimi | famDeepSeek2},
	{hf: "self_attn.g_proj.weight", only: mlaOnly, gguf: "attn_gate.weight"},

	// Dense FFN.
	{hf: "mlp.gate_proj.weight", gguf: "ffn_gate.weight", fam: famKimi | famDeepSeek2},
	{hf: "mlp.up_proj.weight", gguf: "ffn_up.weight", fam: famKimi | famDeepSeek2},
	{hf: "mlp.down_proj.weight", gguf: "ffn_down.weight", fam: famKimi | famDeepSeek2},

	// DeepSeek-V3's MoE (mlp.*): router and its selection bias, stacked
	// experts, shared experts.
	{hf: "mlp.gate.weight", gguf: "ffn_gate_inp.weight", fam: famDeepSeek2 | famQwen3Next},
	{hf: "mlp.gate.e_score_correction_bias", gguf: "exp_probs_b.bias", fam: famDeepSeek2},
	{hf: "mlp.experts.*.gate_proj.weight", gguf: "ffn_gate_exps.weight", op: opExperts, fam: famDeepSeek2 | famQwen3Next},
	{hf: "mlp.experts.*.up_proj.weight", gguf: "ffn_up_exps.weight", op: opExperts, fam: famDeepSeek2 | famQwen3Next},
	{hf: "mlp.experts.*.down_proj.weight", gguf: "ffn_down_exps.weight", op: opExperts, fam: famDeepSeek2 | famQwen3Next},
	{hf: "mlp.shared_experts.gate_proj.weight", gguf: "ffn_gate_shexp.weight", fam: famDeepSeek2},
	{hf: "mlp.shared_experts.up_proj.weight", gguf: "ffn_up_shexp.weight", fam: famDeepSeek2},
	{hf: "mlp.shared_experts.down_proj.weight", gguf: "ffn_down_shexp.weight", fam: famDeepSeek2},

	// Qwen3-Next: zero-centred layer norms (+1), Gated DeltaNet (the
	// grouped in_proj_qkvz / in_proj_ba are kept as llama.cpp's ssm_in /
	// ssm_ba, which it ungroups itself), gated attention (q_proj holds
	// query and gate per head, as attn_q), the gated shared expert.
	{hf: "input_layernorm.weight", gguf: "attn_norm.weight", op: opPlusOne, fam: famQwen3Next},
	{hf: "post_attention_layernorm.weight", gguf: "post_attention_norm.weight", op: opPlusOne, fam: famQwen3Next},
	{hf: "linear_attn.in_proj_qkvz.weight", gguf: "ssm_in.weight", fam: famQwen3Next},
	{hf: "linear_attn.in_proj_ba.weight", gguf: "ssm_ba.weight", fam: famQwen3Next},
	{hf: "linear_attn.conv1d.weight", gguf: "ssm_conv1d.weight", op: opConv2D, fam: famQwen3Next},
	{hf: "linear_attn.dt_bias", gguf: "ssm_dt.bias", fam: famQwen3Next},
	{hf: "linear_attn.A_log", gguf: "ssm_a", op: opALog, fam: famQwen3Next},
	{hf: "linear_attn.norm.weight", gguf: "ssm_norm.weight", fam: famQwen3Next},
	{hf: "linear_attn.out_proj.weight", gguf: "ssm_out.weight", fam: famQwen3Next},
	{hf: "self_attn.q_proj.weight", gguf: "attn_q.weight", fam: famQwen3Next},
	{hf: "self_attn.k_proj.weight", gguf: "attn_k.weight", fam: famQwen3Next},
	{hf: "self_attn.v_proj.weight", gguf: "attn_v.weight", fam: famQwen3Next},
	{hf: "self_attn.o_proj.weight", gguf: "attn_output.weight", fam: famQwen3Next},
	{hf: "self_attn.q_norm.weight", gguf: "attn_q_norm.weight", op: opPlusOne, fam: famQwen3Next},
	{hf: "self_attn.k_norm.weight", gguf: "attn_k_norm.weight", op: opPlusOne, fam: famQwen3Next},
	{hf: "mlp.shared_expert.gate_proj.weight", gguf: "ffn_gate_shexp.weight", fam: famQwen3Next},
	{hf: "mlp.shared_expert.up_proj.weight", gguf: "ffn_up_shexp.weight", fam: famQwen3Next},
	{hf: "mlp.shared_expert.down_proj.weight", gguf: "ffn_down_shexp.weight", fam: famQwen3Next},
	{hf: "mlp.shared_expert_gate.weight", gguf: "ffn_gate_inp_shexp.weight", op: opFlat, fam: famQwen3Next},

	// MoE: router, stacked experts (w1 gate, w3 up, w2 down), shared
	// experts, LatentMoE projections.
	{hf: "block_sparse_moe.gate.weight", gguf: "ffn_gate_inp.weight"},
	{hf: "block_sparse_moe.gate.e_score_correction_bias", gguf: "exp_probs_b.bias"},
	{hf: "block_sparse_moe.experts.*.w1.weight", gguf: "ffn_gate_exps.weight", op: opExperts},
	{hf: "block_sparse_moe.experts.*.w3.weight", gguf: "ffn_up_exps.weight", op: opExperts},
	{hf: "block_sparse_moe.experts.*.w2.weight", gguf: "ffn_down_exps.weight", op: opExperts},
	{hf: "block_sparse_moe.shared_experts.gate_proj.weight", gguf: "ffn_gate_shexp.weight"},
	{hf: "block_sparse_moe.shared_experts.up_proj.weight", gguf: "ffn_up_shexp.weight"},
	{hf: "block_sparse_moe.shared_experts.down_proj.weight", gguf: "ffn_down_shexp.weight"},
	{hf: "block_sparse_moe.routed_expert_down_proj.weight", gguf: "ffn_routed_down.weight"},
	{hf: "block_sparse_moe.routed_expert_up_proj.weight", gguf: "ffn_routed_up.weight"},
	{hf: "block_sparse_moe.routed_expert_norm.weight", gguf: "ffn_routed_norm.weight"},
}

// f32Names are tensors llama.cpp's converter always keeps in F32 (besides
// 1-D tensors, "*_norm.weight" and names not ending in ".weight").
var f32Names = []string{"ffn_gate_inp.weight", "ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight", "ssm_conv1d.weight"}

// fileTypes are general.file_type (enum llama_ftype) per export type.
var fileTypes = map[GGMLType]uint32{TypeF32: 0, TypeF16: 1, TypeQ4_0: 2, TypeQ8_0: 7, TypeBF16: 32, TypeMXFP4: 38, TypeQ4_K: 14}

// expertGatingSoftmax and expertGatingSigmoid are
// LLAMA_EXPERT_GATING_FUNC_TYPE_SOFTMAX and _SIGMOID.
const (
	expertGatingSoftmax = 1
	expertGatingSigmoid = 2
)

// ropeScalingYaRN is llama.cpp's rope.scaling.type for YaRN.
const ropeScalingYaRN = "yarn"

// hparam is one "{arch}.…" metadata key and its value for a config; a nil
// value leaves the key out. k3Only keys are written for kimi-k3 only, fam
// says which families have the key (zero: the Kimi family).
type hparam struct {
	key    string
	k3Only bool
	fam    family
	value  func(c *config.Config) any
}

func u32(v int) any { return uint32(v) }

// hparams are the keys llama.cpp's loader reads for the architectures.
var hparams = []hparam{
	{key: "vocab_size", fam: famAll, value: func(c *config.Config) any { return u32(c.VocabSize) }},
	{key: "context_length", fam: famAll, value: func(c *config.Config) any { return u32(c.MaxPositions) }},
	{key: "embedding_length", fam: famAll, value: func(c *config.Config) any { return u32(c.HiddenSize) }},
	{key: "block_count", fam: famAll, value: func(c *config.Config) any { return u32(c.NumHiddenLayers) }},
	{key: "feed_forward_length", fam: famAll, value: func(c *config.Config) any { return u32(c.IntermediateSize) }},
	{key: "attention.head_count", fam: famAll, value: func(c *config.Config) any { return u32(c.NumHeads) }},
	{key: "attention.head_count_kv", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any {
		// MLA is served as MQA over the latent (1 KV head); 0 marks KDA.
		kv := make([]int32, c.NumHiddenLayers)
		for i, k := range c.Kinds {
			if k == config.MLA {
				kv[i] = 1
			}
		}
		return kv
	}},
	{key: "attention.head_count_kv", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.NumKVHeads) }},
	{key: "attention.layer_norm_rms_epsilon", fam: famAll, value: func(c *config.Config) any { return c.RMSNormEps }},
	{key: "expert_count", fam: famAll, value: func(c *config.Config) any { return u32(c.NumExperts) }},
	{key: "expert_used_count", fam: famAll, value: func(c *config.Config) any { return u32(c.TopK) }},
	{key: "ssm.conv_kernel", fam: famKimi | famQwen3Next, value: func(c *config.Config) any { return u32(c.ConvKernel) }},
	{key: "kda.head_dim", value: func(c *config.Config) any { return u32(c.KDAHeadDim) }},
	{key: "kda.gate_lower_bound", k3Only: true, value: func(c *config.Config) any {
		if !c.GateBounded {
			return nil
		}
		return c.GateLowerBound
	}},
	{key: "attention.q_lora_rank", value: func(c *config.Config) any {
		if c.QLoraRank == 0 {
			return nil
		}
		return u32(c.QLoraRank)
	}},
	// deepseek2 reads the key whatever the layer count; 0 selects the direct q_proj (attn_q).
	{key: "attention.q_lora_rank", fam: famDeepSeek2, value: func(c *config.Config) any { return u32(c.QLoraRank) }},
	{key: "attention.kv_lora_rank", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.KVLoraRank) }},
	{key: "rope.dimension_count", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.QKRopeHeadDim) }},
	{key: "rope.dimension_count", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.RotaryDim) }},
	{key: "rope.freq_base", fam: famQwen3Next | famDeepSeek2, value: func(c *config.Config) any { return float32(c.RopeTheta) }},
	{key: "rope.scaling.type", fam: famQwen3Next | famDeepSeek2, value: yarn(func(*config.RopeScaling) any { return ropeScalingYaRN })},
	{key: "rope.scaling.factor", fam: famQwen3Next | famDeepSeek2, value: yarn(func(y *config.RopeScaling) any { return float32(y.Factor) })},
	{key: "rope.scaling.original_context_length", fam: famQwen3Next | famDeepSeek2, value: yarn(func(y *config.RopeScaling) any { return u32(y.OriginalMaxPositions) })},
	{key: "rope.scaling.yarn_beta_fast", fam: famQwen3Next | famDeepSeek2, value: yarn(func(y *config.RopeScaling) any { return float32(y.BetaFast) })},
	{key: "rope.scaling.yarn_beta_slow", fam: famQwen3Next | famDeepSeek2, value: yarn(func(y *config.RopeScaling) any { return float32(y.BetaSlow) })},
	// DeepSeek's softmax multiplier mscale(s, mscale_all_dim)²: llama.cpp
	// reads 0.1·mscale_all_dim (its converter's TAG_DEEPSEEK2_YARN_LOG_MUL_FIX).
	{key: "rope.scaling.yarn_log_multiplier", fam: famDeepSeek2, value: yarn(func(y *config.RopeScaling) any {
		if y.MScaleAllDim == 0 {
			return nil
		}
		return float32(0.1 * y.MScaleAllDim)
	})},
	{key: "attention.key_length", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.KVLoraRank + c.QKRopeHeadDim) }},
	{key: "attention.value_length", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.KVLoraRank) }},
	{key: "attention.key_length", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.HeadDim) }},
	{key: "attention.value_length", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.HeadDim) }},
	{key: "attention.key_length_mla", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.QKNopeHeadDim + c.QKRopeHeadDim) }},
	{key: "attention.value_length_mla", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.VHeadDim) }},
	{key: "expert_feed_forward_length", fam: famAll, value: func(c *config.Config) any { return u32(c.MoEIntermediateSize) }},
	{key: "expert_shared_count", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.NumSharedExperts) }},
	{key: "expert_shared_feed_forward_length", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.SharedExpertIntermediateSize) }},
	{key: "leading_dense_block_count", fam: famKimi | famDeepSeek2, value: func(c *config.Config) any { return u32(c.FirstKDenseReplace) }},
	{key: "expert_weights_scale", fam: famAll, value: func(c *config.Config) any { return c.RoutedScalingFactor }},
	{key: "expert_weights_norm", k3Only: true, value: func(c *config.Config) any { return c.Renormalize && c.TopK > 1 }},
	{key: "expert_weights_norm", fam: famDeepSeek2, value: func(c *config.Config) any { return c.Renormalize }},
	{key: "expert_gating_func", fam: famAll, value: func(c *config.Config) any {
		if c.SoftmaxRouter {
			return uint32(expertGatingSoftmax)
		}
		return uint32(expertGatingSigmoid)
	}},
	{key: "expert_group_count", fam: famDeepSeek2, value: func(c *config.Config) any {
		if c.NumExpertGroup <= 1 {
			return nil
		}
		return u32(c.NumExpertGroup)
	}},
	{key: "expert_group_used_count", fam: famDeepSeek2, value: func(c *config.Config) any {
		if c.NumExpertGroup <= 1 {
			return nil
		}
		return u32(c.TopKGroup)
	}},
	{key: "ssm.inner_size", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.LinearValueHeads * c.LinearValueHeadDim) }},
	{key: "ssm.state_size", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.LinearKeyHeadDim) }},
	{key: "ssm.time_step_rank", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.LinearValueHeads) }},
	{key: "ssm.group_count", fam: famQwen3Next, value: func(c *config.Config) any { return u32(c.LinearKeyHeads) }},
	{key: "full_attention_interval", fam: famQwen3Next, value: func(c *config.Config) any { return u32(qwenFullInterval(c)) }},
	{key: "expert_latent_length", k3Only: true, value: func(c *config.Config) any {
		if c.RoutedExpertHiddenSize == 0 {
			return nil
		}
		return u32(c.RoutedExpertHiddenSize)
	}},
	{key: "activation.situ_beta", k3Only: true, value: func(c *config.Config) any { return c.SiTUBeta }},
	{key: "activation.situ_linear_beta", k3Only: true, value: func(c *config.Config) any { return c.SiTULinearBeta }},
	{key: "attn_res.block_size", k3Only: true, value: func(c *config.Config) any { return u32(c.AttnResBlockSize) }},
}

// yarn gives a rope.scaling key's value from the config's YaRN scaling
// (none without one).
func yarn(f func(y *config.RopeScaling) any) func(c *config.Config) any {
	return func(c *config.Config) any {
		if c.RopeScaling == nil || c.RopeScaling.Factor <= 1 {
			return nil
		}
		return f(c.RopeScaling)
	}
}

// qwenFullInterval is the n with full attention exactly on layers
// (i+1) % n == 0 (llama.cpp's full_attention_interval), or 0 when the
// layer types follow no such pattern.
func qwenFullInterval(c *config.Config) int {
	for n := 1; n <= len(c.Kinds); n++ {
		ok := true
		for i, k := range c.Kinds {
			if (k == config.GQA) != ((i+1)%n == 0) {
				ok = false
				break
			}
		}
		if ok {
			return n
		}
	}
	return 0
}
