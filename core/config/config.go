// Package config parses and validates Hugging Face config.json files of the
// model families tessera runs: the Kimi Linear family — model_type
// "kimi_linear" (text only) and "kimi_k3" (the multimodal wrapper whose
// text_config is a kimi_linear config with the K3 extension fields) —,
// "qwen3_next" (qwen3next.go) and "deepseek_v3" (deepseekv3.go). Field
// names follow the public checkpoints.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Layout says how a checkpoint nests its tensors.
type Layout int

const (
	// LayoutKimiLinear: model.layers.{i}.…, lm_head.weight at top level.
	LayoutKimiLinear Layout = iota
	// LayoutKimiK3: the text model's tensors under "language_model.".
	LayoutKimiK3
	// LayoutQwen3Next: a Qwen3-Next checkpoint (model.layers.{i}.…).
	LayoutQwen3Next
	// LayoutDeepSeekV3: a DeepSeek-V3 checkpoint (model.layers.{i}.…).
	LayoutDeepSeekV3
)

// String names the layout as in config.json's model_type.
func (l Layout) String() string {
	switch l {
	case LayoutKimiK3:
		return "kimi_k3"
	case LayoutQwen3Next:
		return "qwen3_next"
	case LayoutDeepSeekV3:
		return "deepseek_v3"
	}
	return "kimi_linear"
}

// Kimi reports whether the layout is one of the Kimi Linear family's
// (kimi_linear, kimi_k3): the K3-class model; the other layouts are the
// qwen3_next and deepseek_v3 families.
func (l Layout) Kimi() bool { return l == LayoutKimiLinear || l == LayoutKimiK3 }

// ParseLayout reads "kimi_linear" or "kimi_k3".
func ParseLayout(s string) (Layout, error) {
	switch s {
	case "kimi_linear":
		return LayoutKimiLinear, nil
	case "kimi_k3":
		return LayoutKimiK3, nil
	}
	return 0, fmt.Errorf("unknown layout %q (want kimi_linear or kimi_k3)", s)
}

// LayerKind is a decoder layer's token mixer.
type LayerKind int

const (
	// KDA is Kimi Delta Attention (linear attention, constant-size state).
	KDA LayerKind = iota
	// MLA is (gated) multi-head latent attention, full softmax attention
	// over a latent KV cache.
	MLA
	// GDN is Gated DeltaNet (Qwen3-Next linear attention: scalar decay per
	// head, constant-size state).
	GDN
	// GQA is Qwen3-Next's gated grouped-query softmax attention with partial
	// RoPE over a K/V cache.
	GQA
)

func (k LayerKind) String() string {
	switch k {
	case MLA:
		return "MLA"
	case GDN:
		return "GDN"
	case GQA:
		return "GQA"
	}
	return "KDA"
}

// Config is a validated text-model configuration. Optional features are
// explicit: a zero QLoraRank means a direct q_proj, a zero
// RoutedExpertHiddenSize means plain (not latent) MoE, a zero
// AttnResBlockSize means standard residuals.
type Config struct {
	Layout Layout

	VocabSize        int
	HiddenSize       int
	IntermediateSize int // dense MLP width (layers < first_k_dense_replace)
	NumHiddenLayers  int
	RMSNormEps       float32
	MaxPositions     int // max_position_embeddings / model_max_length
	TieWordEmbed     bool
	BOSTokenID       int   // −1 when absent
	EOSTokenIDs      []int // stop tokens

	// Layer kinds, 0-indexed, from linear_attn_config's 1-indexed lists.
	Kinds []LayerKind

	// KDA (linear_attn_config).
	KDAHeads       int
	KDAHeadDim     int // dk = dv
	ConvKernel     int // short_conv_kernel_size
	FullRankGate   bool
	GateBounded    bool    // gate_lower_bound present (K3 lower-bounded sigmoid gate)
	GateLowerBound float32 // used when GateBounded

	// MLA.
	NumHeads      int
	QLoraRank     int // 0: q_proj directly
	KVLoraRank    int
	QKNopeHeadDim int
	QKRopeHeadDim int
	VHeadDim      int
	MLAOutputGate bool

	// MoE.
	NumExperts             int
	TopK                   int
	NumSharedExperts       int
	MoEIntermediateSize    int
	RoutedExpertHiddenSize int // 0: experts run on the full hidden size
	LatentMoEUseNorm       bool
	Renormalize            bool
	RoutedScalingFactor    float32
	NumExpertGroup         int
	TopKGroup              int
	FirstKDenseReplace     int
	MoELayerFreq           int

	// Activation: SiTU-GLU (K3) or SiLU-GLU.
	SiTU           bool
	SiTUBeta       float32
	SiTULinearBeta float32

	// Block Attention Residuals block size in decoder layers (0: off).
	AttnResBlockSize int

	// Qwen3-Next Gated DeltaNet (linear_* fields; ConvKernel is
	// linear_conv_kernel_dim): Hk key heads of dk, Hv value heads of dv.
	LinearKeyHeads, LinearValueHeads     int
	LinearKeyHeadDim, LinearValueHeadDim int
	// Qwen3-Next gated attention: num_key_value_heads, head_dim.
	NumKVHeads int
	HeadDim    int
	// Qwen3-Next MoE: shared_expert_intermediate_size (0: no shared
	// expert), decoder_sparse_step, mlp_only_layers.
	SharedExpertIntermediateSize int
	DecoderSparseStep            int
	MLPOnlyLayers                []int
	// SoftmaxRouter: experts are scored by a softmax (Qwen3-Next), not σ.
	SoftmaxRouter bool
	// RenormalizeAnyK: norm_topk_prob also renormalises a single expert
	// (DeepSeek-V3, Qwen3-Next); Kimi's moe_renormalize skips k = 1.
	RenormalizeAnyK bool

	// RoPE (qwen3_next, deepseek_v3; the Kimi family is NoPE): rotary
	// channels per head (head_dim·partial_rotary_factor, or
	// qk_rope_head_dim), base, channel pairing and YaRN scaling.
	RotaryDim      int
	RopeTheta      float64
	RopeInterleave bool // pairs (2i, 2i+1) (DeepSeek rope_interleave) instead of (i, i+dim/2)
	RopeScaling    *RopeScaling

	// MediaPlaceholderTokenID is the kimi_k3 image placeholder id (−1: none).
	MediaPlaceholderTokenID int

	// Text is the text config as read (kimi_linear fields), kept so that a
	// checkpoint can be written back in either layout.
	Text map[string]any
	// Quant is "q8" for int8 per-row weights (compressed-tensors
	// int-quantized, channel strategy), "mxfp4" for MXFP4 weights
	// (compressed-tensors mxfp4-pack-quantized, group 32: Kimi K3's routed
	// experts), "" for float weights.
	Quant string
	// QuantConfig is the quantization_config object as read.
	QuantConfig map[string]any
	// quantTargets and quantIgnore are the config's module patterns
	// (QuantTargets).
	quantTargets, quantIgnore []modulePattern

	// Vision is the kimi_k3 vision_config object as read (nil: text only);
	// package vision parses it.
	Vision json.RawMessage
}

// RopeScaling is a "yarn" rope_scaling object (architecture.md §7.2);
// zero fields are absent.
type RopeScaling struct {
	Factor               float64
	OriginalMaxPositions int
	BetaFast, BetaSlow   float64
	MScale, MScaleAllDim float64
	AttentionFactor      float64
	Truncate             bool
}

// IsMoE reports whether layer i (0-indexed) uses the MoE block:
// i ≥ first_k_dense_replace and i % moe_layer_freq == 0 (Kimi,
// DeepSeek-V3), or i ∉ mlp_only_layers and (i+1) % decoder_sparse_step == 0
// (Qwen3-Next).
func (c *Config) IsMoE(i int) bool {
	if c.NumExperts == 0 {
		return false
	}
	if c.Layout == LayoutQwen3Next {
		return !slices.Contains(c.MLPOnlyLayers, i) && (i+1)%c.DecoderSparseStep == 0
	}
	return i >= c.FirstKDenseReplace && i%c.MoELayerFreq == 0
}

// ExpertWidth is the width experts run at: routed_expert_hidden_size for
// LatentMoE, else hidden_size.
func (c *Config) ExpertWidth() int {
	if c.RoutedExpertHiddenSize > 0 {
		return c.RoutedExpertHiddenSize
	}
	return c.HiddenSize
}

// Load reads dir/config.json.
func Load(dir string) (*Config, error) {
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "config.json"), err)
	}
	return c, nil
}

// FieldError names the config field that is wrong.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("config field %s: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// Parse parses and validates a config.json.
func Parse(data []byte) (*Config, error) {
	var top map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&top); err != nil {
		return nil, fmt.Errorf("config.json is not a JSON object: %w", err)
	}
	if top == nil {
		return nil, errors.New("config.json is not a JSON object")
	}
	mt, _ := top["model_type"].(string)
	c := &Config{MediaPlaceholderTokenID: -1}
	text := top
	switch mt {
	case "kimi_linear":
		c.Layout = LayoutKimiLinear
	case "kimi_k3":
		c.Layout = LayoutKimiK3
		tc, ok := top["text_config"].(map[string]any)
		if !ok {
			return nil, fieldErr("text_config", "missing or not an object (required for model_type kimi_k3)")
		}
		text = tc
		if tmt, ok := text["model_type"].(string); ok && tmt != "kimi_linear" {
			return nil, fieldErr("text_config.model_type", "%q is not supported (want kimi_linear)", tmt)
		}
		r := reader{m: top}
		c.MediaPlaceholderTokenID = r.intOr("media_placeholder_token_id", -1)
		if r.err != nil {
			return nil, r.err
		}
		if v, ok := top["vision_config"]; ok && v != nil {
			b, err := json.Marshal(v)
			if err != nil {
				return nil, fieldErr("vision_config", "%v", err)
			}
			c.Vision = b
			if c.MediaPlaceholderTokenID < 0 {
				return nil, fieldErr("media_placeholder_token_id", "missing (required with vision_config)")
			}
		}
	case "qwen3_next", "deepseek_v3":
		var err error
		if mt == "qwen3_next" {
			err = c.parseQwen3Next(top)
		} else {
			err = c.parseDeepSeekV3(top)
		}
		if err != nil {
			return nil, err
		}
		c.Text = top
		return c, nil
	case "":
		return nil, fieldErr("model_type", "missing")
	default:
		return nil, fieldErr("model_type", "%q is not supported (want kimi_linear, kimi_k3, qwen3_next or deepseek_v3)", mt)
	}
	if err := c.parseText(text, c.Layout == LayoutKimiK3); err != nil {
		return nil, err
	}
	c.Text = text
	return c, nil
}

func (c *Config) parseText(m map[string]any, nested bool) error {
	prefix := ""
	if nested {
		prefix = "text_config."
	}
	r := reader{m: m, prefix: prefix}
	c.VocabSize = r.posInt("vocab_size")
	c.HiddenSize = r.posInt("hidden_size")
	c.NumHiddenLayers = r.posInt("num_hidden_layers")
	c.RMSNormEps = float32(r.floatOr("rms_norm_eps", 1e-6))
	c.MaxPositions = r.intOr("max_position_embeddings", 0)
	if c.MaxPositions == 0 {
		c.MaxPositions = r.intOr("model_max_length", 1<<20)
	}
	c.TieWordEmbed = r.boolOr("tie_word_embeddings", false)
	c.BOSTokenID = r.intOr("bos_token_id", -1)
	c.EOSTokenIDs = r.intList("eos_token_id")

	// Mixers.
	la := r.object("linear_attn_config")
	if la.m == nil && r.err == nil {
		r.err = fieldErr(prefix+"linear_attn_config", "missing")
	}
	c.KDAHeads = la.posInt("num_heads")
	c.KDAHeadDim = la.posInt("head_dim")
	c.ConvKernel = la.intOr("short_conv_kernel_size", 4)
	c.FullRankGate = la.boolOr("use_full_rank_gate", false)
	if lb, ok := la.float("gate_lower_bound"); ok {
		c.GateBounded, c.GateLowerBound = true, float32(lb)
	}
	kdaL, fullL := la.intList("kda_layers"), la.intList("full_attn_layers")

	c.NumHeads = r.posInt("num_attention_heads")
	c.QLoraRank = r.intOr("q_lora_rank", 0)
	c.KVLoraRank = r.posInt("kv_lora_rank")
	c.QKNopeHeadDim = r.posInt("qk_nope_head_dim")
	c.QKRopeHeadDim = r.intOr("qk_rope_head_dim", 0)
	c.VHeadDim = r.posInt("v_head_dim")
	c.MLAOutputGate = r.boolOr("mla_use_output_gate", false)
	nope := r.boolOr("mla_use_nope", true)

	// FFN / MoE.
	c.IntermediateSize = r.intOr("intermediate_size", 0)
	c.NumExperts = r.intOr("num_experts", 0)
	c.TopK = r.intOr("num_experts_per_token", 0)
	c.NumSharedExperts = r.intOr("num_shared_experts", 0)
	c.MoEIntermediateSize = r.intOr("moe_intermediate_size", 0)
	c.RoutedExpertHiddenSize = r.intOr("routed_expert_hidden_size", 0)
	c.LatentMoEUseNorm = r.boolOr("latent_moe_use_norm", false)
	c.Renormalize = r.boolOr("moe_renormalize", true)
	c.RoutedScalingFactor = float32(r.floatOr("routed_scaling_factor", 1))
	c.NumExpertGroup = r.intOr("num_expert_group", 1)
	c.TopKGroup = r.intOr("topk_group", 1)
	if !r.boolOr("use_grouped_topk", true) {
		c.NumExpertGroup, c.TopKGroup = 1, 1
	}
	c.FirstKDenseReplace = r.intOr("first_k_dense_replace", 0)
	c.MoELayerFreq = r.intOr("moe_layer_freq", 1)
	act := r.stringOr("hidden_act", "silu")
	c.SiTUBeta = float32(r.floatOr("activation_situ_beta", 4))
	c.SiTULinearBeta = float32(r.floatOr("activation_situ_linear_beta", 0))
	c.AttnResBlockSize = r.intOr("attn_res_block_size", 0)
	routerAct := r.stringOr("moe_router_activation_func", "sigmoid")
	if q, ok := m["quantization_config"]; ok && q != nil && r.err == nil {
		r.err = c.parseQuant(prefix+"quantization_config", q)
	}
	if r.err != nil {
		return r.err
	}
	if la.err != nil {
		return la.err
	}

	switch act {
	case "silu", "swish":
	case "situ":
		c.SiTU = true
	default:
		return fieldErr(prefix+"hidden_act", "%q is not supported (want silu or situ)", act)
	}
	if routerAct != "sigmoid" {
		return fieldErr(prefix+"moe_router_activation_func", "%q is not supported (want sigmoid)", routerAct)
	}
	if !nope {
		return fieldErr(prefix+"mla_use_nope", "false (RoPE in MLA) is not supported: Kimi Linear / K3 MLA is NoPE")
	}
	return c.validate(prefix, kdaL, fullL)
}

// checkLimits applies the sanity caps.
func (c *Config) checkLimits(prefix string) error {
	for _, l := range limits {
		if v := l.get(c); v > l.max {
			return fieldErr(prefix+c.field(l.field), "%d is larger than tessera supports (%d)", v, l.max)
		}
	}
	return nil
}

// Sanity caps: far above any real model, low enough that a hostile
// config.json cannot make tessera allocate absurd amounts before loading.
var limits = []struct {
	field string
	get   func(c *Config) int
	max   int
}{
	{"num_hidden_layers", func(c *Config) int { return c.NumHiddenLayers }, 4096},
	{"hidden_size", func(c *Config) int { return c.HiddenSize }, 1 << 17},
	{"vocab_size", func(c *Config) int { return c.VocabSize }, 1 << 24},
	{"num_experts", func(c *Config) int { return c.NumExperts }, 1 << 16},
	{"linear_attn_config.num_heads", func(c *Config) int { return c.KDAHeads }, 1 << 12},
	{"linear_attn_config.head_dim", func(c *Config) int { return c.KDAHeadDim }, 1 << 12},
	{"linear_attn_config.short_conv_kernel_size", func(c *Config) int { return c.ConvKernel }, 64},
	{"num_attention_heads", func(c *Config) int { return c.NumHeads }, 1 << 12},
	{"kv_lora_rank", func(c *Config) int { return c.KVLoraRank }, 1 << 16},
	{"q_lora_rank", func(c *Config) int { return c.QLoraRank }, 1 << 16},
	{"qk_nope_head_dim", func(c *Config) int { return c.QKNopeHeadDim }, 1 << 12},
	{"qk_rope_head_dim", func(c *Config) int { return c.QKRopeHeadDim }, 1 << 12},
	{"v_head_dim", func(c *Config) int { return c.VHeadDim }, 1 << 12},
	{"intermediate_size", func(c *Config) int { return c.IntermediateSize }, 1 << 20},
	{"moe_intermediate_size", func(c *Config) int { return c.MoEIntermediateSize }, 1 << 20},
	{"routed_expert_hidden_size", func(c *Config) int { return c.RoutedExpertHiddenSize }, 1 << 17},
	{"num_shared_experts", func(c *Config) int { return c.NumSharedExperts }, 1 << 10},
	{"linear_num_key_heads", func(c *Config) int { return c.LinearKeyHeads }, 1 << 12},
	{"linear_num_value_heads", func(c *Config) int { return c.LinearValueHeads }, 1 << 12},
	{"linear_key_head_dim", func(c *Config) int { return c.LinearKeyHeadDim }, 1 << 12},
	{"linear_value_head_dim", func(c *Config) int { return c.LinearValueHeadDim }, 1 << 12},
	{"linear_conv_kernel_dim", func(c *Config) int { return c.ConvKernel }, 64},
	{"num_key_value_heads", func(c *Config) int { return c.NumKVHeads }, 1 << 12},
	{"head_dim", func(c *Config) int { return c.HeadDim }, 1 << 12},
	{"shared_expert_intermediate_size", func(c *Config) int { return c.SharedExpertIntermediateSize }, 1 << 20},
}

func (c *Config) validate(prefix string, kdaL, fullL []int) error {
	if err := c.checkLimits(prefix); err != nil {
		return err
	}
	L := c.NumHiddenLayers
	c.Kinds = make([]LayerKind, L)
	seen := make([]bool, L)
	mark := func(field string, list []int, k LayerKind) error {
		for _, l := range list {
			if l < 1 || l > L {
				return fieldErr(prefix+"linear_attn_config."+field, "layer %d out of range 1..%d (the lists are 1-indexed)", l, L)
			}
			if seen[l-1] {
				return fieldErr(prefix+"linear_attn_config."+field, "layer %d listed twice", l)
			}
			seen[l-1] = true
			c.Kinds[l-1] = k
		}
		return nil
	}
	if err := mark("kda_layers", kdaL, KDA); err != nil {
		return err
	}
	if err := mark("full_attn_layers", fullL, MLA); err != nil {
		return err
	}
	for i, s := range seen {
		if !s {
			return fieldErr(prefix+"linear_attn_config", "layer %d (1-indexed) is in neither kda_layers nor full_attn_layers", i+1)
		}
	}
	if c.ConvKernel < 1 {
		return fieldErr(prefix+"linear_attn_config.short_conv_kernel_size", "must be ≥ 1, got %d", c.ConvKernel)
	}
	return c.validateShared(prefix)
}

// familyNames maps the Kimi config field names validateShared reports to
// the names the qwen3_next and deepseek_v3 configs use for them.
var familyNames = map[string]string{
	"num_experts_per_token": "num_experts_per_tok",
	"num_expert_group":      "n_group",
	"num_shared_experts":    "n_shared_experts",
	"moe_renormalize":       "norm_topk_prob",
}

// field is the name, in c's family, of the config field called kimi in a
// Kimi config.
func (c *Config) field(kimi string) string {
	if c.Layout.Kimi() {
		return kimi
	}
	if kimi == "num_experts" && c.Layout == LayoutDeepSeekV3 {
		return "n_routed_experts"
	}
	if n, ok := familyNames[kimi]; ok {
		return n
	}
	return kimi
}

// validateShared checks what every family shares: sizes, the FFN/MoE
// fields and the context length. Kinds must be set.
func (c *Config) validateShared(prefix string) error {
	pos := func(field string, v int) error {
		if v <= 0 {
			return fieldErr(prefix+field, "must be positive, got %d", v)
		}
		return nil
	}
	L := c.NumHiddenLayers
	if c.GateBounded && !(c.GateLowerBound < 0) {
		return fieldErr(prefix+"linear_attn_config.gate_lower_bound", "must be negative, got %g", c.GateLowerBound)
	}
	if c.QLoraRank < 0 || c.QKRopeHeadDim < 0 {
		return fieldErr(prefix+"q_lora_rank/qk_rope_head_dim", "must not be negative")
	}
	if c.RMSNormEps <= 0 {
		return fieldErr(prefix+"rms_norm_eps", "must be positive, got %g", c.RMSNormEps)
	}
	if c.AttnResBlockSize < 0 {
		return fieldErr(prefix+"attn_res_block_size", "must be positive or null, got %d", c.AttnResBlockSize)
	}
	if c.MoELayerFreq < 1 {
		return fieldErr(prefix+"moe_layer_freq", "must be ≥ 1, got %d", c.MoELayerFreq)
	}
	if c.FirstKDenseReplace < 0 {
		return fieldErr(prefix+"first_k_dense_replace", "must not be negative")
	}
	anyDense, anyMoE := false, false
	for i := 0; i < L; i++ {
		if c.IsMoE(i) {
			anyMoE = true
		} else {
			anyDense = true
		}
	}
	if anyDense {
		if err := pos("intermediate_size", c.IntermediateSize); err != nil {
			return err
		}
	}
	if anyMoE {
		if err := pos("moe_intermediate_size", c.MoEIntermediateSize); err != nil {
			return err
		}
		if c.TopK < 1 || c.TopK > c.NumExperts {
			return fieldErr(prefix+c.field("num_experts_per_token"), "must be in 1..%s (%d), got %d", c.field("num_experts"), c.NumExperts, c.TopK)
		}
		if c.NumSharedExperts < 0 {
			return fieldErr(prefix+c.field("num_shared_experts"), "must not be negative")
		}
		if c.RoutedExpertHiddenSize < 0 {
			return fieldErr(prefix+"routed_expert_hidden_size", "must be positive or null")
		}
		if c.NumExpertGroup < 1 || c.NumExperts%c.NumExpertGroup != 0 {
			return fieldErr(prefix+c.field("num_expert_group"), "%d does not divide %s %d", c.NumExpertGroup, c.field("num_experts"), c.NumExperts)
		}
		if c.NumExpertGroup > 1 && c.NumExpertGroup > c.TopKGroup {
			if c.TopKGroup < 1 {
				return fieldErr(prefix+"topk_group", "must be ≥ 1, got %d", c.TopKGroup)
			}
			if c.TopKGroup*(c.NumExperts/c.NumExpertGroup) < c.TopK {
				return fieldErr(prefix+"topk_group", "%d groups of %d experts cannot supply %d experts", c.TopKGroup, c.NumExperts/c.NumExpertGroup, c.TopK)
			}
		}
	}
	if c.MaxPositions < 1 {
		return fieldErr(prefix+"max_position_embeddings", "must be positive")
	}
	if c.MediaPlaceholderTokenID >= c.VocabSize {
		return fieldErr("media_placeholder_token_id", "%d is outside the vocabulary [0, %d)", c.MediaPlaceholderTokenID, c.VocabSize)
	}
	return nil
}

// Summary is a one-line description of the architecture.
func (c *Config) Summary() string {
	var kinds []string
	for _, k := range c.Kinds {
		kinds = append(kinds, k.String())
	}
	return fmt.Sprintf("%s d=%d L=%d [%s] vocab=%d", c.Layout, c.HiddenSize, c.NumHiddenLayers, strings.Join(kinds, " "), c.VocabSize)
}

// Marshal renders the configuration as a config.json in the given layout:
// the text config at top level for kimi_linear, or nested as text_config of
// a kimi_k3 wrapper. Fields tessera does not interpret are kept.
func (c *Config) Marshal(layout Layout) ([]byte, error) {
	if !c.Layout.Kimi() || !layout.Kimi() {
		if layout != c.Layout {
			return nil, fmt.Errorf("a %s config cannot be written in the %s layout", c.Layout, layout)
		}
		b, err := json.MarshalIndent(c.Text, "", "  ")
		if err != nil {
			return nil, err
		}
		return append(b, '\n'), nil
	}
	text := make(map[string]any, len(c.Text)+2)
	for k, v := range c.Text {
		text[k] = v
	}
	text["model_type"] = "kimi_linear"
	if c.QuantConfig != nil {
		text["quantization_config"] = c.QuantConfig
	}
	var top map[string]any
	if layout == LayoutKimiK3 {
		delete(text, "architectures")
		top = map[string]any{
			"model_type":    "kimi_k3",
			"architectures": []string{"KimiK3ForConditionalGeneration"},
			"text_config":   text,
		}
		if c.MediaPlaceholderTokenID >= 0 {
			top["media_placeholder_token_id"] = c.MediaPlaceholderTokenID
		}
		if c.Vision != nil {
			top["vision_config"] = c.Vision
		}
	} else {
		text["architectures"] = []string{"KimiLinearForCausalLM"}
		top = text
	}
	b, err := json.MarshalIndent(top, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
