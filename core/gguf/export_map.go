package gguf

import "github.com/tessera-llm/tessera/core/config"

// This file is the one table of names: how each tessera (Hugging Face)
// tensor becomes a llama.cpp tensor, and which hyperparameter keys are
// written, for llama.cpp's kimi-k3 and kimi-linear architectures
// (conversion/kimi_k3.py, conversion/kimi_linear.py, src/models/kimi-k3.cpp,
// src/models/kimi-linear.cpp, gguf-py/gguf/constants.py of llama.cpp
// 0ad4a86's era).

// Architecture names as llama.cpp spells them (general.architecture).
const (
	ArchKimiK3     = "kimi-k3"
	ArchKimiLinear = "kimi-linear"
)

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
}

// modelRules map the tensors outside the decoder layers.
var modelRules = []rule{
	{hf: "model.embed_tokens.weight", gguf: "token_embd.weight"},
	{hf: "model.norm.weight", gguf: "output_norm.weight"},
	{hf: "lm_head.weight", gguf: "output.weight"},
	{hf: "model.output_attn_res_norm.weight", gguf: "output_res_score.weight", op: opResScore, pair: "model.output_attn_res_proj.weight"},
}

// layerRules map the tensors of decoder layer i.
var layerRules = []rule{
	{hf: "input_layernorm.weight", gguf: "attn_norm.weight"},
	{hf: "post_attention_layernorm.weight", gguf: "ffn_norm.weight"},
	{hf: "self_attention_res_norm.weight", gguf: "attn_res_score.weight", op: opResScore, pair: "self_attention_res_proj.weight"},
	{hf: "mlp_res_norm.weight", gguf: "ffn_res_score.weight", op: opResScore, pair: "mlp_res_proj.weight"},

	// Both mixers: q_proj is the KDA query and the MLA query without q_lora.
	{hf: "self_attn.q_proj.weight", gguf: "attn_q.weight"},
	{hf: "self_attn.o_proj.weight", gguf: "attn_output.weight"},

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

	// MLA (served by llama.cpp as MQA over the latent: kv_b is split).
	{hf: "self_attn.q_a_proj.weight", only: mlaOnly, gguf: "attn_q_a.weight"},
	{hf: "self_attn.q_a_layernorm.weight", only: mlaOnly, gguf: "attn_q_a_norm.weight"},
	{hf: "self_attn.q_b_proj.weight", only: mlaOnly, gguf: "attn_q_b.weight"},
	{hf: "self_attn.kv_a_proj_with_mqa.weight", only: mlaOnly, gguf: "attn_kv_a_mqa.weight"},
	{hf: "self_attn.kv_a_layernorm.weight", only: mlaOnly, gguf: "attn_kv_a_norm.weight"},
	{hf: "self_attn.kv_b_proj.weight", only: mlaOnly, gguf: "attn_k_b.weight", op: opSplitKVB, pair: "attn_v_b.weight"},
	{hf: "self_attn.g_proj.weight", only: mlaOnly, gguf: "attn_gate.weight"},

	// Dense FFN.
	{hf: "mlp.gate_proj.weight", gguf: "ffn_gate.weight"},
	{hf: "mlp.up_proj.weight", gguf: "ffn_up.weight"},
	{hf: "mlp.down_proj.weight", gguf: "ffn_down.weight"},

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
var f32Names = []string{"ffn_gate_inp.weight", "ssm_conv1d_q.weight", "ssm_conv1d_k.weight", "ssm_conv1d_v.weight"}

// fileTypes are general.file_type (enum llama_ftype) per export type.
var fileTypes = map[GGMLType]uint32{TypeF32: 0, TypeF16: 1, TypeQ4_0: 2, TypeQ8_0: 7, TypeBF16: 32, TypeMXFP4: 38, TypeQ4_K: 14}

// expertGatingSigmoid is LLAMA_EXPERT_GATING_FUNC_TYPE_SIGMOID.
const expertGatingSigmoid = 2

// hparam is one "{arch}.…" metadata key and its value for a config; a nil
// value leaves the key out. k3Only keys are written for kimi-k3 only.
type hparam struct {
	key    string
	k3Only bool
	value  func(c *config.Config) any
}

func u32(v int) any { return uint32(v) }

// hparams are the keys llama.cpp's loader reads for the two architectures.
var hparams = []hparam{
	{key: "vocab_size", value: func(c *config.Config) any { return u32(c.VocabSize) }},
	{key: "context_length", value: func(c *config.Config) any { return u32(c.MaxPositions) }},
	{key: "embedding_length", value: func(c *config.Config) any { return u32(c.HiddenSize) }},
	{key: "block_count", value: func(c *config.Config) any { return u32(c.NumHiddenLayers) }},
	{key: "feed_forward_length", value: func(c *config.Config) any { return u32(c.IntermediateSize) }},
	{key: "attention.head_count", value: func(c *config.Config) any { return u32(c.NumHeads) }},
	{key: "attention.head_count_kv", value: func(c *config.Config) any {
		// MLA is served as MQA over the latent (1 KV head); 0 marks KDA.
		kv := make([]int32, c.NumHiddenLayers)
		for i, k := range c.Kinds {
			if k == config.MLA {
				kv[i] = 1
			}
		}
		return kv
	}},
	{key: "attention.layer_norm_rms_epsilon", value: func(c *config.Config) any { return c.RMSNormEps }},
	{key: "expert_count", value: func(c *config.Config) any { return u32(c.NumExperts) }},
	{key: "expert_used_count", value: func(c *config.Config) any { return u32(c.TopK) }},
	{key: "ssm.conv_kernel", value: func(c *config.Config) any { return u32(c.ConvKernel) }},
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
	{key: "attention.kv_lora_rank", value: func(c *config.Config) any { return u32(c.KVLoraRank) }},
	{key: "rope.dimension_count", value: func(c *config.Config) any { return u32(c.QKRopeHeadDim) }},
	{key: "attention.key_length", value: func(c *config.Config) any { return u32(c.KVLoraRank + c.QKRopeHeadDim) }},
	{key: "attention.value_length", value: func(c *config.Config) any { return u32(c.KVLoraRank) }},
	{key: "attention.key_length_mla", value: func(c *config.Config) any { return u32(c.QKNopeHeadDim + c.QKRopeHeadDim) }},
	{key: "attention.value_length_mla", value: func(c *config.Config) any { return u32(c.VHeadDim) }},
	{key: "expert_feed_forward_length", value: func(c *config.Config) any { return u32(c.MoEIntermediateSize) }},
	{key: "expert_shared_count", value: func(c *config.Config) any { return u32(c.NumSharedExperts) }},
	{key: "leading_dense_block_count", value: func(c *config.Config) any { return u32(c.FirstKDenseReplace) }},
	{key: "expert_weights_scale", value: func(c *config.Config) any { return c.RoutedScalingFactor }},
	{key: "expert_weights_norm", k3Only: true, value: func(c *config.Config) any { return c.Renormalize && c.TopK > 1 }},
	{key: "expert_gating_func", value: func(*config.Config) any { return uint32(expertGatingSigmoid) }},
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
