package config

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestFamilyPresetsParse(t *testing.T) {
	q, err := Parse(preset(t, "qwen3-next-nano"))
	require.NoError(t, err)
	require.Equal(t, LayoutQwen3Next, q.Layout)
	require.Equal(t, []LayerKind{GDN, GDN, GDN, GQA}, q.Kinds)
	require.Equal(t, 8, q.RotaryDim) // head_dim 32 × partial_rotary_factor 0.25
	require.Equal(t, 2, q.NumKVHeads)
	require.True(t, q.SoftmaxRouter && q.Renormalize && q.RenormalizeAnyK)
	require.True(t, q.IsMoE(0) && q.IsMoE(3))
	require.Equal(t, "qwen3_next d=64 L=4 [GDN GDN GDN GQA] vocab=512", q.Summary())

	d, err := Parse(preset(t, "deepseek-v3-nano"))
	require.NoError(t, err)
	require.Equal(t, LayoutDeepSeekV3, d.Layout)
	require.Equal(t, []LayerKind{MLA, MLA, MLA, MLA}, d.Kinds)
	require.False(t, d.IsMoE(0), "first_k_dense_replace = 1")
	require.True(t, d.IsMoE(1))
	require.True(t, d.RopeInterleave)
	require.Equal(t, &RopeScaling{Factor: 4, OriginalMaxPositions: 1024, BetaFast: 32, BetaSlow: 1, MScale: 1, MScaleAllDim: 1, Truncate: true}, d.RopeScaling)
	require.Equal(t, 4, d.NumExpertGroup)
	require.Equal(t, 2, d.TopKGroup)
	require.Equal(t, float32(2.5), d.RoutedScalingFactor)
	require.False(t, d.SoftmaxRouter)

	for _, c := range []*Config{q, d} { // written back as read
		b, err := c.Marshal(c.Layout)
		require.NoError(t, err)
		c2, err := Parse(b)
		require.NoError(t, err)
		require.Equal(t, c.Kinds, c2.Kinds)
		_, err = c.Marshal(LayoutKimiK3)
		require.ErrorContains(t, err, "cannot be written in the kimi_k3 layout")
	}
}

func TestQwen3NextLayerRules(t *testing.T) {
	m := map[string]any{}
	require.NoError(t, json.Unmarshal(preset(t, "qwen3-next-nano"), &m))
	delete(m, "layer_types")
	m["full_attention_interval"] = 2
	m["mlp_only_layers"] = []int{1}
	m["decoder_sparse_step"] = 1
	b, _ := json.Marshal(m)
	c, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, []LayerKind{GDN, GQA, GDN, GQA}, c.Kinds)
	require.Equal(t, []bool{true, false, true, true}, []bool{c.IsMoE(0), c.IsMoE(1), c.IsMoE(2), c.IsMoE(3)})
	m["rope_parameters"] = map[string]any{"rope_type": "default", "rope_theta": 1e6, "partial_rotary_factor": 0.5}
	b, _ = json.Marshal(m)
	c, err = Parse(b)
	require.NoError(t, err)
	require.Equal(t, 1e6, c.RopeTheta)
	require.Equal(t, 16, c.RotaryDim)
}

func TestFamilyErrorsNameTheField(t *testing.T) {
	cases := []struct {
		preset string
		edit   func(m map[string]any)
		want   string
	}{
		{"qwen3-next-nano", func(m map[string]any) { m["layer_types"] = []string{"linear_attention"} }, "layer_types: 1 entries for 4 layers"},
		{"qwen3-next-nano", func(m map[string]any) {
			m["layer_types"] = []string{"linear_attention", "mamba", "full_attention", "full_attention"}
		}, `layer_types: entry 1 is "mamba"`},
		{"qwen3-next-nano", func(m map[string]any) { m["linear_num_value_heads"] = 3 }, "linear_num_value_heads: 3 is not a multiple of linear_num_key_heads 2"},
		{"qwen3-next-nano", func(m map[string]any) { m["num_key_value_heads"] = 3 }, "num_attention_heads: 4 is not a multiple of num_key_value_heads 3"},
		{"qwen3-next-nano", func(m map[string]any) { m["partial_rotary_factor"] = 0.01 }, "partial_rotary_factor: rotary dimension 0"},
		{"qwen3-next-nano", func(m map[string]any) { m["hidden_act"] = "gelu" }, `hidden_act: "gelu" is not supported`},
		{"qwen3-next-nano", func(m map[string]any) { m["attention_bias"] = true }, "attention_bias: true is not supported"},
		{"qwen3-next-nano", func(m map[string]any) { m["use_sliding_window"] = true }, "use_sliding_window"},
		{"qwen3-next-nano", func(m map[string]any) { m["num_experts_per_tok"] = 9 }, "num_experts_per_tok: must be in 1..num_experts (8), got 9"},
		{"qwen3-next-nano", func(m map[string]any) { delete(m, "linear_key_head_dim") }, "linear_key_head_dim: missing"},
		{"qwen3-next-nano", func(m map[string]any) { m["rope_scaling"] = map[string]any{"rope_type": "dynamic", "factor": 2} }, `rope_type: "dynamic" is not supported`},
		{"deepseek-v3-nano", func(m map[string]any) { m["scoring_func"] = "softmax" }, `scoring_func: "softmax" is not supported`},
		{"deepseek-v3-nano", func(m map[string]any) { m["topk_method"] = "greedy" }, `topk_method: "greedy" is not supported`},
		{"deepseek-v3-nano", func(m map[string]any) { m["n_group"] = 3 }, "n_group: 3 does not divide n_routed_experts 16"},
		{"deepseek-v3-nano", func(m map[string]any) { m["topk_group"] = 1; m["num_experts_per_tok"] = 5 }, "topk_group: 1 groups of 4 experts cannot supply 5 experts"},
		{"deepseek-v3-nano", func(m map[string]any) { m["qk_rope_head_dim"] = 7 }, "qk_rope_head_dim: rotary dimension 7 must be even"},
		{"deepseek-v3-nano", func(m map[string]any) { m["rope_scaling"].(map[string]any)["factor"] = 0.5 }, "rope_scaling.factor: must be ≥ 1"},
		{"deepseek-v3-nano", func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "fp8"}
		}, "quantization_config: quantized deepseek_v3 checkpoints are not supported"},
		{"deepseek-v3-nano", func(m map[string]any) { delete(m, "kv_lora_rank") }, "kv_lora_rank: missing"},
	}
	for _, c := range cases {
		m := map[string]any{}
		require.NoError(t, json.Unmarshal(preset(t, c.preset), &m))
		c.edit(m)
		b, _ := json.Marshal(m)
		_, err := Parse(b)
		require.ErrorContains(t, err, c.want, c.want)
	}
}
