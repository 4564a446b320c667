package gguf

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/models/presets"
)

// TestFamilyArchRefusals: what llama.cpp's qwen3next and deepseek2 cannot
// run as tessera does is refused, naming the config field.
func TestFamilyArchRefusals(t *testing.T) {
	for _, c := range []struct {
		preset string
		edit   func(m map[string]any)
		arch   string // "" when refused
		want   string
	}{
		{"qwen3-next-nano", func(map[string]any) {}, ArchQwen3Next, ""},
		{"deepseek-v3-nano", func(map[string]any) {}, ArchDeepSeek2, ""},
		{"qwen3-next-nano", func(m map[string]any) { m["linear_value_head_dim"] = 8 }, "", "linear_value_head_dim: 8 differs"},
		{"qwen3-next-nano", func(m map[string]any) { m["mlp_only_layers"] = []int{2} }, "", "mlp_only_layers: layer 2 is dense"},
		{"qwen3-next-nano", func(m map[string]any) { m["shared_expert_intermediate_size"] = 0 }, "", "shared_expert_intermediate_size"},
		{"qwen3-next-nano", func(m map[string]any) { m["norm_topk_prob"] = false }, "", "norm_topk_prob"},
		{"qwen3-next-nano", func(m map[string]any) {
			m["layer_types"] = []string{"full_attention", "linear_attention", "linear_attention", "full_attention"}
		}, "", "layer_types"},
		{"deepseek-v3-nano", func(m map[string]any) { m["rope_interleave"] = false }, "", "rope_interleave"},
		{"deepseek-v3-nano", func(m map[string]any) { m["n_shared_experts"] = 0 }, "", "n_shared_experts"},
		{"deepseek-v3-nano", func(m map[string]any) { m["moe_layer_freq"] = 2 }, "", "moe_layer_freq"},
		{"deepseek-v3-nano", func(m map[string]any) { m["rope_scaling"].(map[string]any)["mscale"] = 0.7 }, "", "rope_scaling"},
	} {
		raw, err := presets.Read(c.preset)
		require.NoError(t, err)
		m := map[string]any{}
		require.NoError(t, json.Unmarshal(raw, &m))
		c.edit(m)
		b, _ := json.Marshal(m)
		cfg, err := config.Parse(b)
		require.NoError(t, err)
		arch, err := chooseArch(cfg)
		if c.arch != "" {
			require.NoError(t, err)
			require.Equal(t, c.arch, arch)
			continue
		}
		var re *RefusedError
		require.ErrorAs(t, err, &re, c.want)
		require.Contains(t, err.Error(), c.want)
	}
}

// TestFamilyHparams: the qwen3next and deepseek2 keys llama.cpp reads, as
// written for the presets.
func TestFamilyHparams(t *testing.T) {
	keys := func(preset string) map[string]any {
		raw, err := presets.Read(preset)
		require.NoError(t, err)
		cfg, err := config.Parse(raw)
		require.NoError(t, err)
		arch, err := chooseArch(cfg)
		require.NoError(t, err)
		w := NewWriter()
		require.NoError(t, addMetadata(w, cfg, arch, TypeF32, preset))
		out := map[string]any{}
		for _, kv := range w.kvs {
			out[kv.Key] = kv.Value
		}
		return out
	}
	q := keys("qwen3-next-nano")
	require.Equal(t, "qwen3next", q["general.architecture"])
	for k, v := range map[string]any{"ssm.state_size": uint32(16), "ssm.group_count": uint32(2), "ssm.time_step_rank": uint32(4),
		"ssm.inner_size": uint32(64), "full_attention_interval": uint32(4), "rope.dimension_count": uint32(8),
		"attention.head_count_kv": uint32(2), "attention.key_length": uint32(32), "expert_shared_feed_forward_length": uint32(32),
		"expert_gating_func": uint32(expertGatingSoftmax)} {
		require.Equal(t, v, q["qwen3next."+k], k)
	}
	require.NotContains(t, q, "qwen3next.kda.head_dim")
	d := keys("deepseek-v3-nano")
	for k, v := range map[string]any{"expert_group_count": uint32(4), "expert_group_used_count": uint32(2), "leading_dense_block_count": uint32(1),
		"rope.scaling.type": "yarn", "rope.scaling.factor": float32(4), "rope.scaling.original_context_length": uint32(1024),
		"rope.scaling.yarn_log_multiplier": float32(0.1), "expert_weights_norm": true, "expert_weights_scale": float32(2.5),
		"attention.key_length_mla": uint32(24), "attention.q_lora_rank": uint32(32), "expert_gating_func": uint32(expertGatingSigmoid)} {
		require.Equal(t, v, d["deepseek2."+k], k)
	}
}
