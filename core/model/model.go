// Package model is the K3-class language model written once, reading like
// its equations: an embedding, decoder layers whose token mixer is Kimi
// Delta Attention (KDA) or gated multi-head latent attention (MLA) and whose
// FFN is a dense GLU or a (Latent)MoE, Block Attention Residuals or plain
// pre-norm residuals, a final norm and the LM head. Struct fields are named
// after the checkpoint tensors they hold (architecture.md §5.1).
package model

import (
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/core/vision"
)

// Model holds the weights of one text model.
type Model struct {
	Cfg *config.Config

	EmbedTokens *tensor.Mat // model.embed_tokens.weight [V, d]
	Layers      []*Layer
	Norm        []float32   // model.norm.weight [d]
	LMHead      *tensor.Mat // lm_head.weight [V, d]

	// Block AttnRes model-level output read (nil without AttnRes).
	OutputAttnResProj []float32 // model.output_attn_res_proj.weight [1, d]
	OutputAttnResNorm []float32 // model.output_attn_res_norm.weight [d]

	// VisionCfg is the vision tower's configuration of a kimi_k3
	// checkpoint with a vision_config; nil for text-only models. Its
	// tensors (vision_tower.*, mm_projector.*) are checked at load and
	// read on first use: HasVision, VisionTower.
	VisionCfg *vision.Config
	tower     *lazyTower

	// Deferred: the weight matrices are deferred (LoadDeferred), for a GPU
	// runner to upload; the CPU runner refuses such a model.
	Deferred bool

	// Family is the forward pass of a model that is not of the Kimi family
	// (qwen3_next, deepseek_v3: family.go); nil for K3-class models, whose
	// forward pass is k3.go. EmbedTokens, Norm and LMHead are set for every
	// family, Layers only for the Kimi family.
	Family nn.Model
}

// Layer is one decoder layer: exactly one of KDA and MLA, exactly one of
// MLP and MoE.
type Layer struct {
	Kind                   config.LayerKind
	InputLayernorm         []float32 // input_layernorm.weight [d]
	PostAttentionLayernorm []float32 // post_attention_layernorm.weight [d]

	KDA *KDA
	MLA *MLA
	MLP *MLP // dense FFN (mlp.*)
	MoE *MoE // block_sparse_moe.*

	// Block AttnRes pseudo-queries and norm weights (nil without AttnRes).
	SelfAttentionResProj []float32 // self_attention_res_proj.weight [1, d]
	SelfAttentionResNorm []float32 // self_attention_res_norm.weight [d]
	MLPResProj           []float32 // mlp_res_proj.weight [1, d]
	MLPResNorm           []float32 // mlp_res_norm.weight [d]
}

// KDA is one Kimi Delta Attention mixer (self_attn.* of a KDA layer).
type KDA struct {
	QProj, KProj, VProj       *tensor.Mat // [H·dk, d]
	QConv1d, KConv1d, VConv1d []float32   // [H·dk, 1, K] depthwise taps
	FAProj                    *tensor.Mat // f_a_proj [dk, d]
	FBProj                    *tensor.Mat // f_b_proj [H·dk, dk]
	DtBias                    []float32   // dt_bias [H·dk]
	ALog                      []float32   // A_log: H (per head) or H·dk values
	BProj                     *tensor.Mat // b_proj [H, d]
	GProj                     *tensor.Mat // g_proj [H·dv, d] (K3 full-rank gate)
	GAProj, GBProj            *tensor.Mat // g_a_proj [dv, d], g_b_proj [H·dv, dv] (low rank)
	ONorm                     []float32   // o_norm.weight [dv]
	OProj                     *tensor.Mat // o_proj [d, H·dv]
}

// MLA is one gated multi-head latent attention mixer (self_attn.* of a full
// attention layer).
type MLA struct {
	QProj          *tensor.Mat // q_proj [H·(dn+dr), d] when q_lora_rank is null
	QAProj         *tensor.Mat // q_a_proj [r_q, d]
	QALayernorm    []float32   // q_a_layernorm.weight [r_q]
	QBProj         *tensor.Mat // q_b_proj [H·(dn+dr), r_q]
	KVAProjWithMQA *tensor.Mat // kv_a_proj_with_mqa [r_kv+dr, d]
	KVALayernorm   []float32   // kv_a_layernorm.weight [r_kv]
	KVBProj        *tensor.Mat // kv_b_proj [H·(dn+dv), r_kv]
	GProj          *tensor.Mat // g_proj [H·dv, d] output gate (mla_use_output_gate)
	OProj          *tensor.Mat // o_proj [d, H·dv]
}

// MLP is a GLU feed-forward block (nn.GLU): down(act(gate(x), up(x))).
type MLP = nn.GLU

// MoE is a sparse MoE block (block_sparse_moe.*, nn.MoE), optionally
// LatentMoE.
type MoE = nn.MoE
