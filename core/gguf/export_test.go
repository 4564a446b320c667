package gguf

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"github.com/tessera-llm/tessera/models/presets"
)

// modelSpec describes a random test model: a preset, an optional layout,
// config edits and tensor edits.
type modelSpec struct {
	preset string
	layout string // "" keeps the preset's
	edit   func(m map[string]any)
	tweak  func(cfg *config.Config, ts []safetensors.WriteTensor) []safetensors.WriteTensor
}

// makeModel writes a random F32 checkpoint of s into a new directory.
func makeModel(t testing.TB, s modelSpec) string {
	t.Helper()
	raw, err := presets.Read(s.preset)
	require.NoError(t, err)
	if s.edit != nil {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m))
		s.edit(m)
		raw, err = json.Marshal(m)
		require.NoError(t, err)
	}
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	if s.layout != "" {
		cfg.Layout, err = config.ParseLayout(s.layout)
		require.NoError(t, err)
	}
	ts, err := model.RandomCheckpoint(cfg, 7, "F32")
	require.NoError(t, err)
	if s.tweak != nil {
		ts = s.tweak(cfg, ts)
	}
	js, err := cfg.Marshal(cfg.Layout)
	require.NoError(t, err)
	dir := filepath.Join(t.TempDir(), s.preset)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644))
	require.NoError(t, safetensors.WriteDir(dir, ts, map[string]string{"format": "pt"}, 0))
	return dir
}

// export runs Export into a temp dir and opens the result.
func export(t *testing.T, dir string, opt ExportOptions) *File {
	t.Helper()
	out := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, Export(dir, out, opt))
	f, err := Open(out)
	require.NoError(t, err)
	t.Cleanup(func() { f.Close() })
	return f
}

// llamaTensors lists the tensors llama.cpp's loader creates for cfg
// (src/models/kimi-k3.cpp and kimi-linear.cpp load_arch_tensors, optional
// tensors included when the config has them), with their ne. Written from
// the loader, independently of export_map.go.
func llamaTensors(arch string, c *config.Config) map[string][]uint64 {
	u := func(v ...int) []uint64 {
		out := make([]uint64, len(v))
		for i, x := range v {
			out[i] = uint64(x)
		}
		return out
	}
	d, V, H, dk := c.HiddenSize, c.VocabSize, c.NumHeads, c.KDAHeadDim
	di := H * dk
	latent := d
	if c.RoutedExpertHiddenSize > 0 {
		latent = c.RoutedExpertHiddenSize
	}
	m := map[string][]uint64{
		"token_embd.weight":  u(d, V),
		"output_norm.weight": u(d),
		"output.weight":      u(d, V),
	}
	if c.AttnResBlockSize > 0 {
		m["output_res_score.weight"] = u(d)
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		b := fmt.Sprintf("blk.%d.", i)
		add := func(n string, ne []uint64) { m[b+n] = ne }
		add("attn_norm.weight", u(d))
		add("ffn_norm.weight", u(d))
		if c.AttnResBlockSize > 0 {
			add("attn_res_score.weight", u(d))
			add("ffn_res_score.weight", u(d))
		}
		if c.Kinds[i] == config.KDA {
			for _, x := range []string{"q", "k", "v"} {
				add("ssm_conv1d_"+x+".weight", u(c.ConvKernel, 1, di, 1))
				add("attn_"+x+".weight", u(d, di))
			}
			add("ssm_f_a.weight", u(d, dk))
			add("ssm_f_b.weight", u(dk, di))
			add("ssm_beta.weight", u(d, H))
			if arch == ArchKimiK3 {
				add("ssm_a", u(H))
				add("ssm_g.weight", u(d, di))
			} else {
				add("ssm_a", u(1, H, 1, 1))
				add("ssm_g_a.weight", u(d, dk))
				add("ssm_g_b.weight", u(dk, di))
			}
			add("ssm_dt.bias", u(di))
			add("ssm_norm.weight", u(dk))
			add("attn_output.weight", u(di, d))
		} else {
			r, dn, dr, dv := c.KVLoraRank, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim
			if c.QLoraRank > 0 {
				add("attn_q_a_norm.weight", u(c.QLoraRank))
				add("attn_q_a.weight", u(d, c.QLoraRank))
				add("attn_q_b.weight", u(c.QLoraRank, H*(dn+dr)))
			} else {
				add("attn_q.weight", u(d, H*(dn+dr)))
			}
			add("attn_kv_a_norm.weight", u(r))
			add("attn_kv_a_mqa.weight", u(d, r+dr))
			add("attn_k_b.weight", u(dn, r, H))
			add("attn_v_b.weight", u(r, dv, H))
			if c.MLAOutputGate {
				add("attn_gate.weight", u(d, H*dv))
			}
			add("attn_output.weight", u(H*dv, d))
		}
		if i < c.FirstKDenseReplace {
			add("ffn_gate.weight", u(d, c.IntermediateSize))
			add("ffn_down.weight", u(c.IntermediateSize, d))
			add("ffn_up.weight", u(d, c.IntermediateSize))
			continue
		}
		E, I := c.NumExperts, c.MoEIntermediateSize
		add("ffn_gate_inp.weight", u(d, E))
		add("exp_probs_b.bias", u(E))
		add("ffn_gate_exps.weight", u(latent, I, E))
		add("ffn_down_exps.weight", u(I, latent, E))
		add("ffn_up_exps.weight", u(latent, I, E))
		if c.RoutedExpertHiddenSize > 0 {
			add("ffn_routed_down.weight", u(d, latent))
			add("ffn_routed_up.weight", u(latent, d))
			if c.LatentMoEUseNorm {
				add("ffn_routed_norm.weight", u(latent))
			}
		}
		if c.NumSharedExperts > 0 {
			S := I * c.NumSharedExperts
			add("ffn_gate_shexp.weight", u(d, S))
			add("ffn_down_shexp.weight", u(S, d))
			add("ffn_up_shexp.weight", u(d, S))
		}
	}
	return m
}

func tensorShapes(f *File) map[string][]uint64 {
	m := map[string][]uint64{}
	for _, t := range f.Tensors {
		m[t.Name] = t.Ne
	}
	return m
}

func getKV[T any](t *testing.T, f *File, key string) T {
	t.Helper()
	v, ok := f.Get(key)
	require.True(t, ok, "key %s missing", key)
	x, ok := v.(T)
	require.True(t, ok, "key %s is %T", key, v)
	return x
}

func TestExportPresetsMatchLlamaLoader(t *testing.T) {
	cases := []struct {
		spec modelSpec
		arch string
	}{
		{modelSpec{preset: "k3-nano", layout: "kimi_linear"}, ArchKimiK3},
		{modelSpec{preset: "k3-nano", layout: "kimi_k3"}, ArchKimiK3},
		{modelSpec{preset: "kimi-linear-nano"}, ArchKimiLinear},
		{modelSpec{preset: "k3-nano-vision"}, ArchKimiK3},
	}
	for _, c := range cases {
		t.Run(c.spec.preset+"/"+c.spec.layout, func(t *testing.T) {
			dir := makeModel(t, c.spec)
			cfg, err := config.Load(dir)
			require.NoError(t, err)
			f := export(t, dir, ExportOptions{Type: "f32"})
			assert.Equal(t, c.arch, f.Architecture())
			assert.Equal(t, llamaTensors(c.arch, cfg), tensorShapes(f))
			for _, ti := range f.Tensors {
				assert.Equal(t, TypeF32, ti.Type, ti.Name)
			}
			a := c.arch + "."
			assert.Equal(t, uint32(cfg.HiddenSize), getKV[uint32](t, f, a+"embedding_length"))
			assert.Equal(t, uint32(cfg.NumHiddenLayers), getKV[uint32](t, f, a+"block_count"))
			assert.Equal(t, []int32{0, 0, 0, 1}, getKV[[]int32](t, f, a+"attention.head_count_kv"))
			assert.Equal(t, uint32(cfg.KVLoraRank+cfg.QKRopeHeadDim), getKV[uint32](t, f, a+"attention.key_length"))
			assert.Equal(t, uint32(cfg.KVLoraRank), getKV[uint32](t, f, a+"attention.value_length"))
			assert.Equal(t, uint32(cfg.QKNopeHeadDim+cfg.QKRopeHeadDim), getKV[uint32](t, f, a+"attention.key_length_mla"))
			assert.Equal(t, uint32(cfg.VHeadDim), getKV[uint32](t, f, a+"attention.value_length_mla"))
			assert.Equal(t, uint32(cfg.KDAHeadDim), getKV[uint32](t, f, a+"kda.head_dim"))
			assert.Equal(t, uint32(cfg.ConvKernel), getKV[uint32](t, f, a+"ssm.conv_kernel"))
			assert.Equal(t, uint32(2), getKV[uint32](t, f, a+"expert_gating_func"))
			assert.Equal(t, cfg.RoutedScalingFactor, getKV[float32](t, f, a+"expert_weights_scale"))
			assert.Equal(t, uint32(cfg.FirstKDenseReplace), getKV[uint32](t, f, a+"leading_dense_block_count"))
			assert.Equal(t, uint32(0), getKV[uint32](t, f, "general.file_type"))
			assert.Equal(t, "none", getKV[string](t, f, "tokenizer.ggml.model"))
			for _, kv := range f.KVs {
				assert.NotContains(t, kv.Key, "expert_group", "no expert-group keys")
			}
			if c.arch == ArchKimiK3 {
				assert.Equal(t, true, getKV[bool](t, f, a+"expert_weights_norm"))
				assert.Equal(t, uint32(cfg.AttnResBlockSize), getKV[uint32](t, f, a+"attn_res.block_size"))
				assert.Equal(t, float32(-5), getKV[float32](t, f, a+"kda.gate_lower_bound"))
				assert.Equal(t, uint32(cfg.RoutedExpertHiddenSize), getKV[uint32](t, f, a+"expert_latent_length"))
				assert.Equal(t, float32(4), getKV[float32](t, f, a+"activation.situ_beta"))
				assert.Equal(t, float32(25), getKV[float32](t, f, a+"activation.situ_linear_beta"))
				assert.Equal(t, uint32(cfg.QLoraRank), getKV[uint32](t, f, a+"attention.q_lora_rank"))
			} else {
				for _, k := range []string{"attn_res.block_size", "activation.situ_beta", "expert_weights_norm", "attention.q_lora_rank", "kda.gate_lower_bound"} {
					_, ok := f.Get(a + k)
					assert.False(t, ok, k)
				}
			}
		})
	}
}

// TestExportConversions checks the values of every converted tensor kind
// against the checkpoint.
func TestExportConversions(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano", layout: "kimi_k3"})
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	ck, err := safetensors.OpenDir(dir)
	require.NoError(t, err)
	defer ck.Close()
	src := func(name string) []float32 {
		x, err := ck.Float32("language_model." + name)
		require.NoError(t, err, name)
		return x
	}
	f := export(t, dir, ExportOptions{Type: "f32"})
	got := func(name string) []float32 {
		x, err := f.Float32(name)
		require.NoError(t, err, name)
		return x
	}
	// Plain copies keep the data (only the shape is reversed).
	assert.Equal(t, src("model.embed_tokens.weight"), got("token_embd.weight"))
	assert.Equal(t, src("model.layers.0.self_attn.q_conv1d.weight"), got("blk.0.ssm_conv1d_q.weight"))
	assert.Equal(t, src("model.layers.0.self_attn.dt_bias"), got("blk.0.ssm_dt.bias"))
	assert.Equal(t, src("model.layers.0.self_attn.g_proj.weight"), got("blk.0.ssm_g.weight"))
	assert.Equal(t, src("model.layers.3.self_attn.g_proj.weight"), got("blk.3.attn_gate.weight"))
	assert.Equal(t, src("model.layers.1.block_sparse_moe.gate.e_score_correction_bias"), got("blk.1.exp_probs_b.bias"))
	// ssm_a = −exp(A_log).
	aLog, a := src("model.layers.2.self_attn.A_log"), got("blk.2.ssm_a")
	require.Len(t, a, cfg.KDAHeads)
	for h := range a {
		assert.InDelta(t, -math.Exp(float64(aLog[h])), a[h], 1e-6*math.Exp(float64(aLog[h])))
		assert.Less(t, a[h], float32(0))
	}
	// res score = norm ⊙ proj.
	for _, p := range [][3]string{
		{"model.layers.1.self_attention_res_norm.weight", "model.layers.1.self_attention_res_proj.weight", "blk.1.attn_res_score.weight"},
		{"model.layers.2.mlp_res_norm.weight", "model.layers.2.mlp_res_proj.weight", "blk.2.ffn_res_score.weight"},
		{"model.output_attn_res_norm.weight", "model.output_attn_res_proj.weight", "output_res_score.weight"},
	} {
		n, pr, s := src(p[0]), src(p[1]), got(p[2])
		require.Len(t, s, cfg.HiddenSize)
		for i := range s {
			assert.Equal(t, n[i]*pr[i], s[i], "%s[%d]", p[2], i)
		}
	}
	// kv_b [H·(dn+dv), r] → k_b ne [dn, r, H] (transposed per head), v_b ne [r, dv, H].
	H, dn, dv, r := cfg.NumHeads, cfg.QKNopeHeadDim, cfg.VHeadDim, cfg.KVLoraRank
	kv, kb, vb := src("model.layers.3.self_attn.kv_b_proj.weight"), got("blk.3.attn_k_b.weight"), got("blk.3.attn_v_b.weight")
	for h := 0; h < H; h++ {
		for j := 0; j < r; j++ {
			for i := 0; i < dn; i++ {
				require.Equal(t, kv[(h*(dn+dv)+i)*r+j], kb[i+dn*(j+r*h)], "k_b h=%d j=%d i=%d", h, j, i)
			}
			for i := 0; i < dv; i++ {
				require.Equal(t, kv[(h*(dn+dv)+dn+i)*r+j], vb[j+r*(i+dv*h)], "v_b h=%d i=%d j=%d", h, i, j)
			}
		}
	}
	// Experts stacked along the last ne.
	for _, w := range [][2]string{{"w1", "ffn_gate_exps"}, {"w3", "ffn_up_exps"}, {"w2", "ffn_down_exps"}} {
		stacked := got("blk.2." + w[1] + ".weight")
		per := len(stacked) / cfg.NumExperts
		for e := 0; e < cfg.NumExperts; e++ {
			assert.Equal(t, src(fmt.Sprintf("model.layers.2.block_sparse_moe.experts.%d.%s.weight", e, w[0])), stacked[e*per:(e+1)*per], "%s expert %d", w[1], e)
		}
	}
}

func TestExportTypes(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano"})
	cases := []struct {
		typ      string
		want     GGMLType
		fileType uint32
	}{{"f16", TypeF16, 1}, {"bf16", TypeBF16, 32}, {"q8_0", TypeQ8_0, 7}, {"F32", TypeF32, 0}}
	f32 := export(t, dir, ExportOptions{Type: "f32"})
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			f := export(t, dir, ExportOptions{Type: c.typ})
			assert.Equal(t, c.fileType, getKV[uint32](t, f, "general.file_type"))
			types := map[string]GGMLType{}
			for _, ti := range f.Tensors {
				types[ti.Name] = ti.Type
			}
			// Always F32: 1-D, norms, non-".weight" names, conv taps, router.
			for _, n := range []string{"blk.0.attn_norm.weight", "blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.ssm_conv1d_k.weight", "blk.1.ffn_gate_inp.weight", "blk.1.exp_probs_b.bias", "blk.1.attn_res_score.weight", "blk.3.attn_kv_a_norm.weight", "blk.1.ffn_routed_norm.weight", "output_norm.weight"} {
				assert.Equal(t, TypeF32, types[n], n)
			}
			for _, n := range []string{"token_embd.weight", "output.weight", "blk.0.attn_q.weight", "blk.1.ffn_down_exps.weight", "blk.3.attn_q_b.weight"} {
				assert.Equal(t, c.want, types[n], n)
			}
			// attn_k_b of an F16 or Q8_0 file is F32 (llama.cpp aborts on it
			// in its AMX buffer otherwise); BF16 keeps BF16.
			kb := c.want
			if c.want == TypeQ8_0 || c.want == TypeF16 {
				kb = TypeF32
			}
			assert.Equal(t, kb, types["blk.3.attn_k_b.weight"])
			// Values stay close to the F32 export.
			ref, err := f32.Float32("blk.0.attn_q.weight")
			require.NoError(t, err)
			x, err := f.Float32("blk.0.attn_q.weight")
			require.NoError(t, err)
			var maxErr, maxAbs float64
			for i := range ref {
				maxErr = max(maxErr, math.Abs(float64(x[i]-ref[i])))
				maxAbs = max(maxAbs, math.Abs(float64(ref[i])))
			}
			assert.LessOrEqual(t, maxErr, maxAbs/100, "%s error %g", c.typ, maxErr)
		})
	}
}

func TestExportLayoutsAgree(t *testing.T) {
	read := func(layout string) []byte {
		dir := makeModel(t, modelSpec{preset: "k3-nano", layout: layout})
		out := filepath.Join(t.TempDir(), "m.gguf")
		require.NoError(t, Export(dir, out, ExportOptions{Type: "q8_0", Name: "k3-nano"}))
		b, err := os.ReadFile(out)
		require.NoError(t, err)
		return b
	}
	assert.Equal(t, read("kimi_linear"), read("kimi_k3"), "both checkpoint layouts give the same GGUF")
}

func TestExportK3MicroWithVocab(t *testing.T) {
	dir := filepath.Join("..", "..", "models", "k3-micro")
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	f := export(t, dir, ExportOptions{Type: "f32"})
	assert.Equal(t, ArchKimiK3, f.Architecture())
	assert.Equal(t, llamaTensors(ArchKimiK3, cfg), tensorShapes(f))
	assert.Equal(t, "k3-micro", getKV[string](t, f, "general.name"))
	assert.Equal(t, "gpt2", getKV[string](t, f, "tokenizer.ggml.model"))
	assert.Equal(t, "gpt-2", getKV[string](t, f, "tokenizer.ggml.pre"))
	tokens := getKV[[]string](t, f, "tokenizer.ggml.tokens")
	types := getKV[[]int32](t, f, "tokenizer.ggml.token_type")
	merges := getKV[[]string](t, f, "tokenizer.ggml.merges")
	require.Len(t, tokens, 4096)
	require.Len(t, types, 4096)
	assert.Len(t, merges, 3824)
	assert.Equal(t, "Ġ t", merges[0])
	assert.Equal(t, "<|im_end|>", tokens[4081])
	assert.Equal(t, int32(3), types[4081], "special tokens are CONTROL")
	assert.Equal(t, int32(1), types[300])
	assert.Equal(t, uint32(4080), getKV[uint32](t, f, "tokenizer.ggml.bos_token_id"))
	assert.Equal(t, uint32(4081), getKV[uint32](t, f, "tokenizer.ggml.eos_token_id"))
	assert.Equal(t, false, getKV[bool](t, f, "tokenizer.ggml.add_bos_token"))
	seen := map[string]bool{}
	for _, tok := range tokens {
		assert.False(t, seen[tok], "duplicate token %q", tok)
		seen[tok] = true
	}
	// F16 weights widen exactly.
	ck, err := safetensors.OpenDir(dir)
	require.NoError(t, err)
	defer ck.Close()
	want, err := ck.Float32("language_model.model.layers.1.block_sparse_moe.routed_expert_down_proj.weight")
	require.NoError(t, err)
	x, err := f.Float32("blk.1.ffn_routed_down.weight")
	require.NoError(t, err)
	assert.Equal(t, want, x)

	// --no-vocab: an id-only vocabulary.
	g := export(t, dir, ExportOptions{Type: "f16", NoVocab: true})
	assert.Equal(t, "none", getKV[string](t, g, "tokenizer.ggml.model"))
	_, ok := g.Get("tokenizer.ggml.tokens")
	assert.False(t, ok)
	assert.Equal(t, uint32(4096), getKV[uint32](t, g, "kimi-k3.vocab_size"))
}

// set assigns a value at a dotted path of a config map.
func set(path string, v any) func(map[string]any) {
	return func(m map[string]any) {
		for {
			i := 0
			for i < len(path) && path[i] != '.' {
				i++
			}
			if i == len(path) {
				m[path] = v
				return
			}
			m = m[path[:i]].(map[string]any)
			path = path[i+1:]
		}
	}
}

func TestExportRefusesByName(t *testing.T) {
	perChannelALog := func(constant bool) func(*config.Config, []safetensors.WriteTensor) []safetensors.WriteTensor {
		return func(cfg *config.Config, ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			for i, w := range ts {
				if w.Name == "model.layers.0.self_attn.A_log" {
					hd := cfg.KDAHeads * cfg.KDAHeadDim
					data := make([]float32, hd)
					for j := range data {
						data[j] = w.Data[j/cfg.KDAHeadDim]
						if !constant && j == 5 {
							data[j] += 0.25
						}
					}
					ts[i] = safetensors.WriteTensor{Name: w.Name, DType: "F32", Shape: []int{hd}, Data: data}
				}
			}
			return ts
		}
	}
	cases := []struct {
		name    string
		spec    modelSpec
		feature string
	}{
		{"expert groups", modelSpec{preset: "k3-nano", edit: func(m map[string]any) { m["num_expert_group"] = 2; m["topk_group"] = 1 }}, "num_expert_group"},
		{"per-channel A_log", modelSpec{preset: "k3-nano", tweak: perChannelALog(false)}, "model.layers.0.self_attn.A_log"},
		{"KDA heads", modelSpec{preset: "k3-nano", edit: set("linear_attn_config.num_heads", 2)}, "linear_attn_config.num_heads"},
		{"moe layer freq", modelSpec{preset: "k3-nano", edit: set("moe_layer_freq", 2)}, "moe_layer_freq"},
		{"dense only", modelSpec{preset: "k3-nano", edit: set("num_experts", 0)}, "num_experts"},
		{"silu with K3 features", modelSpec{preset: "k3-nano", edit: set("hidden_act", "silu")}, "hidden_act"},
		{"low-rank gate with K3 features", modelSpec{preset: "k3-nano", edit: set("linear_attn_config.use_full_rank_gate", false)}, "linear_attn_config.use_full_rank_gate"},
		{"kimi-linear q_lora", modelSpec{preset: "kimi-linear-nano", edit: set("q_lora_rank", 32)}, "q_lora_rank"},
		{"kimi-linear no renormalise", modelSpec{preset: "kimi-linear-nano", edit: set("moe_renormalize", false)}, "moe_renormalize"},
		{"kimi-linear top-1", modelSpec{preset: "kimi-linear-nano", edit: set("num_experts_per_token", 1)}, "moe_renormalize"},
		{"q8 checkpoint", modelSpec{preset: "k3-nano", tweak: func(cfg *config.Config, ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			cfg.Quant, cfg.QuantConfig = "q8", config.Q8Config()
			return model.QuantizeQ8(cfg, ts)
		}}, "quantization_config"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := makeModel(t, c.spec)
			outDir := t.TempDir()
			out := filepath.Join(outDir, "m.gguf")
			err := Export(dir, out, ExportOptions{Type: "f16"})
			var re *RefusedError
			require.ErrorAs(t, err, &re, "%v", err)
			assert.Equal(t, c.feature, re.Feature)
			assert.Contains(t, err.Error(), c.feature)
			assertEmptyDir(t, outDir)
		})
	}
	// A per-channel A_log that is constant within each head is stored.
	dir := makeModel(t, modelSpec{preset: "k3-nano", tweak: perChannelALog(true)})
	f := export(t, dir, ExportOptions{Type: "f32"})
	a, err := f.Float32("blk.0.ssm_a")
	require.NoError(t, err)
	assert.Len(t, a, 4)
}

func TestExportBadInput(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano"})
	out := filepath.Join(t.TempDir(), "m.gguf")
	assert.ErrorContains(t, Export(dir, out, ExportOptions{Type: "q3_k"}), `type "q3_k": want f32, f16, bf16, q8_0, q4_0, q4_k or mxfp4`)
	assert.ErrorContains(t, Export(filepath.Join(dir, "nope"), out, ExportOptions{Type: "f16"}), "config.json")
	assert.ErrorContains(t, Export(dir, filepath.Join(dir, "missing-dir", "m.gguf"), ExportOptions{Type: "f16"}), "missing-dir")

	// A tokenizer.json that is not byte-level BPE is refused by name;
	// NoVocab exports without it.
	tok := `{"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []}, "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "\\s+"}}, "normalizer": null, "added_tokens": []}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(tok), 0o644))
	err := Export(dir, out, ExportOptions{Type: "f16"})
	var re *RefusedError
	require.ErrorAs(t, err, &re)
	assert.Equal(t, "tokenizer.json pre_tokenizer", re.Feature)
	assert.Contains(t, err.Error(), "--no-vocab")
	require.NoError(t, Export(dir, out, ExportOptions{Type: "f16", NoVocab: true}))
	tok = `{"model": {"type": "Unigram", "vocab": []}, "pre_tokenizer": null}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(tok), 0o644))
	require.ErrorAs(t, Export(dir, out, ExportOptions{Type: "f16"}), &re)
	assert.Equal(t, "tokenizer.json model.type", re.Feature)
	tok = `{"model": {"type": "BPE", "vocab": {"a": 600}, "merges": [["a", "b"]]}, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}}`
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(tok), 0o644))
	assert.ErrorContains(t, Export(dir, out, ExportOptions{Type: "f16"}), "id 600 outside the model's vocab_size 512")
}

// assertEmptyDir checks that a failed export left nothing behind.
func assertEmptyDir(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	assert.Empty(t, names, "files left in %s", dir)
}

// TestExportIsAtomic: a failure while writing (a non-finite weight in one of
// the last tensors) or a cancellation leaves neither a partial file nor a
// temporary, and an existing file at the output path is untouched.
func TestExportIsAtomic(t *testing.T) {
	bad := "model.layers.3.block_sparse_moe.shared_experts.down_proj.weight"
	dir := makeModel(t, modelSpec{preset: "k3-nano", tweak: func(_ *config.Config, ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for _, w := range ts {
			if w.Name == bad {
				w.Data[len(w.Data)-1] = float32(math.NaN())
			}
		}
		return ts
	}})
	outDir := t.TempDir()
	out := filepath.Join(outDir, "m.gguf")
	err := Export(dir, out, ExportOptions{Type: "q8_0"})
	require.Error(t, err)
	assert.Contains(t, err.Error(), "blk.3.ffn_down_shexp.weight")
	assert.Contains(t, err.Error(), "NaN")
	assertEmptyDir(t, outDir)

	require.NoError(t, os.WriteFile(out, []byte("previous export"), 0o644))
	require.Error(t, Export(dir, out, ExportOptions{Type: "f32"}))
	b, err := os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "previous export", string(b))
	ents, err := os.ReadDir(outDir)
	require.NoError(t, err)
	assert.Len(t, ents, 1, "no temporary file left")

	good := makeModel(t, modelSpec{preset: "k3-nano"})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = Export(good, out, ExportOptions{Type: "f32", Context: ctx})
	require.ErrorIs(t, err, context.Canceled)
	b, err = os.ReadFile(out)
	require.NoError(t, err)
	assert.Equal(t, "previous export", string(b))
	ents, err = os.ReadDir(outDir)
	require.NoError(t, err)
	assert.Len(t, ents, 1)

	require.NoError(t, Export(good, out, ExportOptions{Type: "f32"}))
	f, err := Open(out)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, ArchKimiK3, f.Architecture())
	assert.False(t, errors.Is(err, context.Canceled))
}

func TestExportChatTemplate(t *testing.T) {
	dir := filepath.Join("..", "..", "models", "k3-micro")
	f := export(t, dir, ExportOptions{Type: "f16"})
	assert.Equal(t, kimiChatTemplate, getKV[string](t, f, "tokenizer.chat_template"), "Kimi markers in the vocabulary")

	// tokenizer_config.json's template wins; a vocabulary without the
	// markers gets none.
	tmp := t.TempDir()
	assert.Equal(t, "{{ x }}", chatTemplate(writeTokConfig(t, tmp, `{"chat_template": "{{ x }}"}`), []string{"<|im_end|>"}))
	assert.Equal(t, "", chatTemplate(t.TempDir(), []string{"a", "<|im_end|>"}))
}

func writeTokConfig(t *testing.T, dir, js string) string {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "tokenizer_config.json"), []byte(js), 0o644))
	return dir
}

// TestKimiChatTemplateMatchesRenderKimi renders the template with Python's
// jinja2 (what Hugging Face uses; llama.cpp's and Ollama's engines follow
// it) and compares with tessera's own renderer.
func TestKimiChatTemplateMatchesRenderKimi(t *testing.T) {
	py := jinjaPython()
	if py == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but no python3 can import jinja2: install it with scripts/setup.sh jinja")
		}
		t.Skip("python3 with jinja2 not available (scripts/setup.sh jinja)")
	}
	convs := [][]tokenizer.Message{
		{{Role: "user", Content: "Hi"}},
		{{Role: "system", Content: "S"}, {Role: "user", Content: "Q"}, {Role: "assistant", Content: "A"}, {Role: "user", Content: "Q2"}},
		{{Role: "user", Content: "x"}, {Role: "tool", Content: "r"}},
		{},
	}
	in, err := json.Marshal(map[string]any{"template": kimiChatTemplate, "convs": convs})
	require.NoError(t, err)
	cmd := exec.Command(py, "-c", `import sys, json, jinja2
d = json.load(sys.stdin)
tm = jinja2.Environment().from_string(d["template"])
print(json.dumps([tm.render(messages=c or [], add_generation_prompt=g) for c in d["convs"] for g in (True, False)]))`)
	cmd.Stdin = bytes.NewReader(in)
	out, err := cmd.Output()
	require.NoError(t, err)
	var got []string
	require.NoError(t, json.Unmarshal(out, &got))
	var want []string
	for _, c := range convs {
		for _, g := range []bool{true, false} {
			want = append(want, tokenizer.RenderKimi(c, g))
		}
	}
	assert.Equal(t, want, got)
}

// jinjaPython is a python3 that can import jinja2: the one on PATH, else
// Debian's (/usr/bin/python3 with python3-jinja2, which scripts/setup.sh
// installs when another python3 comes first on PATH); "" if none.
func jinjaPython() string {
	cands := []string{"/usr/bin/python3"}
	if p, err := exec.LookPath("python3"); err == nil {
		cands = append([]string{p}, cands...)
	}
	for _, py := range cands {
		if exec.Command(py, "-c", "import jinja2").Run() == nil {
			return py
		}
	}
	return ""
}
