package config

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func preset(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "..", "models", "presets", name+".json"))
	require.NoError(t, err)
	return b
}

func TestPresetsParse(t *testing.T) {
	for _, name := range []string{"k3-nano", "k3-mini", "kimi-linear-nano"} {
		c, err := Parse(preset(t, name))
		require.NoError(t, err, name)
		require.Equal(t, LayoutKimiLinear, c.Layout)
		require.Equal(t, MLA, c.Kinds[3], name) // layer 4 (1-indexed) is full attention
		require.Equal(t, KDA, c.Kinds[0], name)
		require.False(t, c.IsMoE(0), "first_k_dense_replace = 1")
		require.True(t, c.IsMoE(1))
	}
	k3, _ := Parse(preset(t, "k3-nano"))
	require.True(t, k3.SiTU && k3.GateBounded && k3.FullRankGate && k3.MLAOutputGate)
	require.Equal(t, float32(-5), k3.GateLowerBound)
	require.Equal(t, 2, k3.AttnResBlockSize)
	require.Equal(t, 32, k3.ExpertWidth())
	kl, _ := Parse(preset(t, "kimi-linear-nano"))
	require.False(t, kl.SiTU || kl.GateBounded || kl.FullRankGate || kl.MLAOutputGate)
	require.Zero(t, kl.AttnResBlockSize)
	require.Zero(t, kl.QLoraRank)
	require.Equal(t, 64, kl.ExpertWidth())
}

func TestMarshalRoundTrip(t *testing.T) {
	c, err := Parse(preset(t, "k3-nano"))
	require.NoError(t, err)
	for _, l := range []Layout{LayoutKimiLinear, LayoutKimiK3} {
		b, err := c.Marshal(l)
		require.NoError(t, err)
		d, err := Parse(b)
		require.NoError(t, err)
		require.Equal(t, l, d.Layout)
		d.Layout, d.Text = c.Layout, nil
		want := *c
		want.Text = nil
		require.Equal(t, &want, d)
	}
}

// mutate parses the k3-nano preset after f edits its JSON object.
func mutate(t *testing.T, f func(m map[string]any)) error {
	var m map[string]any
	require.NoError(t, json.Unmarshal(preset(t, "k3-nano"), &m))
	f(m)
	b, err := json.Marshal(m)
	require.NoError(t, err)
	_, err = Parse(b)
	return err
}

func TestErrorsNameTheField(t *testing.T) {
	la := func(m map[string]any) map[string]any { return m["linear_attn_config"].(map[string]any) }
	cases := []struct {
		name string
		edit func(m map[string]any)
		want string
	}{
		{"unknown model_type", func(m map[string]any) { m["model_type"] = "llama" }, `config field model_type: "llama" is not supported`},
		{"missing model_type", func(m map[string]any) { delete(m, "model_type") }, "config field model_type: missing"},
		{"missing hidden", func(m map[string]any) { delete(m, "hidden_size") }, "config field hidden_size: missing"},
		{"negative vocab", func(m map[string]any) { m["vocab_size"] = -3 }, "config field vocab_size: must be positive, got -3"},
		{"fractional", func(m map[string]any) { m["num_hidden_layers"] = 2.5 }, "config field num_hidden_layers: want an integer"},
		{"string number", func(m map[string]any) { m["kv_lora_rank"] = "32" }, "config field kv_lora_rank: want a number"},
		{"layer out of range", func(m map[string]any) { la(m)["full_attn_layers"] = []int{5} }, "linear_attn_config.full_attn_layers: layer 5 out of range 1..4"},
		{"layer twice", func(m map[string]any) { la(m)["full_attn_layers"] = []int{3, 4} }, "full_attn_layers: layer 3 listed twice"},
		{"layer missing", func(m map[string]any) { la(m)["kda_layers"] = []int{1, 2} }, "layer 3 (1-indexed) is in neither"},
		{"top-k > experts", func(m map[string]any) { m["num_experts_per_token"] = 9 }, "num_experts_per_token: must be in 1..num_experts (8), got 9"},
		{"act", func(m map[string]any) { m["hidden_act"] = "gelu" }, `hidden_act: "gelu" is not supported`},
		{"router", func(m map[string]any) { m["moe_router_activation_func"] = "softmax" }, "moe_router_activation_func"},
		{"rope mla", func(m map[string]any) { m["mla_use_nope"] = false }, "mla_use_nope"},
		{"groups", func(m map[string]any) { m["num_expert_group"] = 3 }, "num_expert_group: 3 does not divide num_experts 8"},
		{"positive bound", func(m map[string]any) { la(m)["gate_lower_bound"] = 1.0 }, "gate_lower_bound: must be negative"},
		{"quant groups", func(m map[string]any) {
			m["quantization_config"] = map[string]any{"quant_method": "compressed-tensors"}
		}, "quantization_config.config_groups: missing"},
		{"mxfp4", func(m map[string]any) { m["quantization_config"] = map[string]any{"quant_method": "mxfp4"} }, "quantization_config.quant_method: mxfp4 is not supported"},
		{"group-wise", func(m map[string]any) {
			q := Q8Config()
			q["config_groups"].(map[string]any)["group_0"].(map[string]any)["weights"].(map[string]any)["strategy"] = "group"
			m["quantization_config"] = q
		}, "only {num_bits: 8, type: int, symmetric: true, strategy: channel} is supported"},
		{"no linear attn", func(m map[string]any) { delete(m, "linear_attn_config") }, "linear_attn_config: missing"},
	}
	for _, c := range cases {
		err := mutate(t, c.edit)
		require.Error(t, err, c.name)
		require.Contains(t, err.Error(), c.want, c.name)
	}
}

func TestKimiK3Wrapper(t *testing.T) {
	var text map[string]any
	require.NoError(t, json.Unmarshal(preset(t, "k3-nano"), &text))
	top := map[string]any{"model_type": "kimi_k3", "text_config": text, "media_placeholder_token_id": 163605}
	b, _ := json.Marshal(top)
	_, err := Parse(b)
	require.ErrorContains(t, err, "config field media_placeholder_token_id: 163605 is outside the vocabulary [0, 512)")
	top["media_placeholder_token_id"] = 511
	top["vision_config"] = map[string]any{"patch_size": 14}
	b, _ = json.Marshal(top)
	c, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, LayoutKimiK3, c.Layout)
	require.Equal(t, 511, c.MediaPlaceholderTokenID)
	require.JSONEq(t, `{"patch_size":14}`, string(c.Vision))
	out, err := c.Marshal(LayoutKimiK3)
	require.NoError(t, err)
	require.Contains(t, string(out), `"vision_config"`)
	delete(top, "media_placeholder_token_id")
	b, _ = json.Marshal(top)
	_, err = Parse(b)
	require.ErrorContains(t, err, "media_placeholder_token_id: missing (required with vision_config)")
	delete(top, "vision_config")
	top["media_placeholder_token_id"] = 511
	delete(text, "hidden_size")
	b, _ = json.Marshal(top)
	_, err = Parse(b)
	require.ErrorContains(t, err, "config field text_config.hidden_size: missing")
	_, err = Parse([]byte(`{"model_type":"kimi_k3"}`))
	require.ErrorContains(t, err, "config field text_config: missing")
	_, err = Parse([]byte(`[1,2]`))
	require.ErrorContains(t, err, "not a JSON object")
}

func FuzzParse(f *testing.F) {
	for _, n := range []string{"k3-nano", "kimi-linear-nano", "qwen3-next-nano", "deepseek-v3-nano"} {
		f.Add(preset(f, n))
	}
	f.Add([]byte(`{"model_type":"kimi_k3","text_config":{}}`))
	f.Add([]byte(`{"model_type":"kimi_linear","linear_attn_config":{"kda_layers":[1e30]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Parse(data)
		if err != nil {
			if strings.Contains(err.Error(), "panic") {
				t.Fatal(err)
			}
			return
		}
		// A config that parses is internally consistent.
		if len(c.Kinds) != c.NumHiddenLayers || c.HiddenSize <= 0 || c.VocabSize <= 0 {
			t.Fatalf("accepted inconsistent config: %+v", c)
		}
		for i := 0; i < c.NumHiddenLayers; i++ {
			if c.IsMoE(i) && (c.TopK < 1 || c.TopK > c.NumExperts) {
				t.Fatalf("accepted bad top-k")
			}
		}
	})
}

func TestQ8ConfigRoundTrip(t *testing.T) {
	require.NoError(t, mutate(t, func(m map[string]any) { m["quantization_config"] = Q8Config() }))
	var m map[string]any
	require.NoError(t, json.Unmarshal(preset(t, "k3-nano"), &m))
	m["quantization_config"] = Q8Config()
	b, _ := json.Marshal(m)
	c, err := Parse(b)
	require.NoError(t, err)
	require.Equal(t, "q8", c.Quant)
	out, err := c.Marshal(LayoutKimiK3)
	require.NoError(t, err)
	d, err := Parse(out)
	require.NoError(t, err)
	require.Equal(t, "q8", d.Quant)
}

// k3MXFP4Quant is a quantization_config as Kimi K3 ships it (format in
// the group, targets by class, an ignore list).
const k3MXFP4Quant = `{"quant_method": "compressed-tensors", "quantization_status": "compressed",
 "config_groups": {"group_0": {"format": "mxfp4-pack-quantized", "targets": ["Linear"], "input_activations": null,
   "weights": {"num_bits": 4, "type": "float", "symmetric": true, "group_size": 32, "strategy": "group",
     "dynamic": false, "observer": "minmax", "scale_dtype": "torch.uint8"}}},
 "ignore": ["re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
   "re:.*vision_tower.*", "re:.*mm_projector.*"]}`

func TestMXFP4QuantConfig(t *testing.T) {
	parse := func(q string) (*Config, error) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(preset(t, "k3-nano"), &m))
		var qv any
		d := json.NewDecoder(strings.NewReader(q))
		d.UseNumber()
		require.NoError(t, d.Decode(&qv))
		m["quantization_config"] = qv
		b, _ := json.Marshal(m)
		return Parse(b)
	}
	c, err := parse(k3MXFP4Quant)
	require.NoError(t, err)
	require.Equal(t, "mxfp4", c.Quant)
	for module, want := range map[string]bool{
		"language_model.model.layers.1.block_sparse_moe.experts.7.w1": true,
		"model.layers.3.block_sparse_moe.experts.0.w2":                true,
		"model.layers.3.block_sparse_moe.shared_experts.down_proj":    false,
		"model.layers.0.mlp.gate_proj":                                false,
		"model.layers.4.self_attn.q_proj":                             false,
		"lm_head":                                                     false,
	} {
		require.Equal(t, want, c.QuantTargets(module), module)
	}
	// Patterns are Python's re (compressed-tensors matches with re.match):
	// a lookahead, which Go's RE2 syntax lacks, works.
	la, err := parse(strings.Replace(k3MXFP4Quant, `"re:.*lm_head.*"`, `"re:(?!.*experts)model\\.layers\\.2\\..*"`, 1))
	require.NoError(t, err)
	require.False(t, la.QuantTargets("model.layers.2.block_sparse_moe.gate"))
	require.True(t, la.QuantTargets("model.layers.2.block_sparse_moe.experts.1.w1"))
	require.True(t, la.QuantTargets("model.layers.3.block_sparse_moe.gate"), "anchored at the start of the name")
	// What tessera writes parses back to the same scheme and targets.
	w := &Config{}
	require.NoError(t, w.SetQuant(MXFP4Config()))
	require.Equal(t, "mxfp4", w.Quant)
	require.True(t, w.QuantTargets("model.layers.1.block_sparse_moe.experts.12.w3"))
	require.False(t, w.QuantTargets("model.layers.1.block_sparse_moe.routed_expert_down_proj"))
	out, err := c.Marshal(LayoutKimiK3)
	require.NoError(t, err)
	d, err := Parse(out)
	require.NoError(t, err)
	require.Equal(t, "mxfp4", d.Quant)

	for _, bad := range []struct{ edit, field string }{
		{`"group_size": 32`, `"group_size": 16`},
		{`"num_bits": 4`, `"num_bits": 8`},
		{`"type": "float"`, `"type": "int"`},
		{`"strategy": "group"`, `"strategy": "channel"`},
		{`"format": "mxfp4-pack-quantized"`, `"format": "nvfp4-pack-quantized"`},
		{`"input_activations": null`, `"input_activations": {"num_bits": 8}`},
		{`"re:.*lm_head.*"`, `"re:(["`},
	} {
		_, err := parse(strings.Replace(k3MXFP4Quant, bad.edit, bad.field, 1))
		require.Error(t, err, bad.field)
		require.ErrorContains(t, err, "quantization_config", bad.field)
	}
}
