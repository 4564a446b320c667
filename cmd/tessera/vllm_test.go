package main

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// vllmSpec is testdata/vllm/kimi_linear.json: the config fields and the
// tensor names and shapes vLLM's kimi_linear model reads (see its "what").
type vllmSpec struct {
	ConfigFields     []string       `json:"config_fields"`
	LinearAttnFields []string       `json:"linear_attn_config_fields"`
	Required         map[string]any `json:"required_values"`
	UnreadOff        struct {
		Top        map[string]any `json:"top"`
		LinearAttn map[string]any `json:"linear_attn_config"`
	} `json:"unread_must_be_off"`
	Dims       map[string]string `json:"dims"`
	Top        map[string][]any  `json:"top"`
	LMHead     map[string][]any  `json:"lm_head_unless_tied"`
	EveryLayer map[string][]any  `json:"every_layer"`
	KDALayer   map[string][]any  `json:"kda_layer"`
	MLALayer   map[string][]any  `json:"mla_layer"`
	DenseLayer map[string][]any  `json:"dense_layer"`
	MoELayer   map[string][]any  `json:"moe_layer"`
	MoEExpert  map[string][]any  `json:"moe_expert"`
	MoEShared  map[string][]any  `json:"moe_shared_when_num_shared_experts"`
}

func readVLLMSpec(t *testing.T) vllmSpec {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "testdata", "vllm", "kimi_linear.json"))
	if err != nil {
		t.Fatal(err)
	}
	var s vllmSpec
	if err := json.Unmarshal(b, &s); err != nil {
		t.Fatalf("testdata/vllm/kimi_linear.json: %v", err)
	}
	return s
}

// safetensorsShapes reads the tensor names and shapes of a safetensors
// file's header.
func safetensorsShapes(t *testing.T, path string) map[string][]int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := binary.LittleEndian.Uint64(b[:8])
	var hdr map[string]json.RawMessage
	if err := json.Unmarshal(b[8:8+n], &hdr); err != nil {
		t.Fatalf("%s: header: %v", path, err)
	}
	out := map[string][]int{}
	for name, raw := range hdr {
		if name == "__metadata__" {
			continue
		}
		var e struct {
			Shape []int `json:"shape"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("%s: %s: %v", path, name, err)
		}
		out[name] = e.Shape
	}
	return out
}

// jsonText writes a config value as it appears in config.json.
func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// vllmProblems lists what would keep vLLM's kimi_linear model from loading
// the checkpoint in dir, by spec: missing or wrong config fields, missing
// tensors, tensors it has no parameter for, and shapes that differ.
func vllmProblems(t *testing.T, spec vllmSpec, dir string) []string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	var probs []string
	if cfg["model_type"] != "kimi_linear" {
		probs = append(probs, fmt.Sprintf("model_type %v (vLLM's model is kimi_linear)", cfg["model_type"]))
	}
	for _, f := range spec.ConfigFields {
		if _, ok := cfg[f]; !ok {
			probs = append(probs, "config field "+f+" missing")
		}
	}
	lac, _ := cfg["linear_attn_config"].(map[string]any)
	for _, f := range spec.LinearAttnFields {
		if _, ok := lac[f]; !ok {
			probs = append(probs, "config field linear_attn_config."+f+" missing")
		}
	}
	for f, want := range spec.Required {
		if got, ok := cfg[f]; ok && !reflect.DeepEqual(got, want) {
			probs = append(probs, fmt.Sprintf("config %s = %s, vLLM supports only %s", f, jsonText(got), jsonText(want)))
		}
	}
	off := func(where string, m map[string]any, fields map[string]any) {
		for f, offv := range fields {
			if v, ok := m[f]; ok && !reflect.DeepEqual(v, offv) {
				probs = append(probs, fmt.Sprintf("config %s%s = %s, which vLLM's kimi_linear does not read (want it absent or %s)", where, f, jsonText(v), jsonText(offv)))
			}
		}
	}
	off("", cfg, spec.UnreadOff.Top)
	off("linear_attn_config.", lac, spec.UnreadOff.LinearAttn)
	if len(probs) > 0 {
		return probs // the shapes below need the fields
	}
	num := func(m map[string]any, k string) int { v, _ := m[k].(float64); return int(v) }
	dim := map[string]int{
		"hidden":       num(cfg, "hidden_size"),
		"vocab":        num(cfg, "vocab_size"),
		"intermediate": num(cfg, "intermediate_size"),
		"kda_heads":    num(lac, "num_heads"),
		"head_dim":     num(lac, "head_dim"),
		"proj":         num(lac, "num_heads") * num(lac, "head_dim"),
		"conv":         num(lac, "short_conv_kernel_size"),
		"mla_q":        num(cfg, "num_attention_heads") * (num(cfg, "qk_nope_head_dim") + num(cfg, "qk_rope_head_dim")),
		"kv_a":         num(cfg, "kv_lora_rank") + num(cfg, "qk_rope_head_dim"),
		"kv_lora":      num(cfg, "kv_lora_rank"),
		"kv_b":         num(cfg, "num_attention_heads") * (num(cfg, "qk_nope_head_dim") + num(cfg, "v_head_dim")),
		"mla_o":        num(cfg, "num_attention_heads") * num(cfg, "v_head_dim"),
		"experts":      num(cfg, "num_experts"),
		"moe_inter":    num(cfg, "moe_intermediate_size"),
		"shared_inter": num(cfg, "num_shared_experts") * num(cfg, "moe_intermediate_size"),
	}
	for d := range spec.Dims {
		if _, ok := dim[d]; !ok {
			t.Fatalf("testdata names dimension %q, which this test does not compute", d)
		}
	}
	want := map[string][]int{}
	add := func(prefix string, m map[string][]any, e int) {
		for name, shape := range m {
			var s []int
			for _, d := range shape {
				switch v := d.(type) {
				case float64:
					s = append(s, int(v))
				case string:
					n, ok := dim[v]
					if !ok {
						t.Fatalf("%s: unknown dimension %q", name, v)
					}
					s = append(s, n)
				}
			}
			want[prefix+strings.ReplaceAll(name, "{e}", fmt.Sprint(e))] = s
		}
	}
	add("", spec.Top, 0)
	if tied, _ := cfg["tie_word_embeddings"].(bool); !tied {
		add("", spec.LMHead, 0)
	}
	kda, _ := lac["kda_layers"].([]any)
	for i := range num(cfg, "num_hidden_layers") {
		p := fmt.Sprintf("model.layers.%d.", i)
		add(p, spec.EveryLayer, 0)
		if slices.Contains(kda, any(float64(i+1))) {
			add(p, spec.KDALayer, 0)
		} else {
			add(p, spec.MLALayer, 0)
		}
		if ne := num(cfg, "num_experts"); ne > 0 && i >= num(cfg, "first_k_dense_replace") && i%max(1, num(cfg, "moe_layer_freq")) == 0 {
			add(p, spec.MoELayer, 0)
			for e := range ne {
				add(p, spec.MoEExpert, e)
			}
			if cfg["num_shared_experts"] != nil {
				add(p, spec.MoEShared, 0)
			}
		} else {
			add(p, spec.DenseLayer, 0)
		}
	}
	have := safetensorsShapes(t, filepath.Join(dir, "model.safetensors"))
	for name, s := range want {
		h, ok := have[name]
		switch {
		case !ok:
			probs = append(probs, "tensor "+name+" missing")
		case !slices.Equal(h, s):
			probs = append(probs, fmt.Sprintf("tensor %s has shape %v, vLLM's parameter %v", name, h, s))
		}
	}
	for name := range have {
		if _, ok := want[name]; !ok {
			probs = append(probs, "tensor "+name+" has no vLLM parameter")
		}
	}
	slices.Sort(probs)
	return probs
}

// TestCheckpointLoadsInVLLMKimiLinear backs the README's claim for the
// kimi_linear layout: a tessera checkpoint of a Kimi-Linear-shaped config
// holds exactly the tensors, with the shapes, and the config fields that
// vLLM's kimi_linear model reads (testdata/vllm/kimi_linear.json). It does
// not run vLLM. A K3 config in the same layout must be reported as not
// loadable, with its reasons, so the check can fail.
func TestCheckpointLoadsInVLLMKimiLinear(t *testing.T) {
	spec := readVLLMSpec(t)
	for _, dtype := range []string{"f32", "bf16"} {
		dir := filepath.Join(t.TempDir(), "kln-"+dtype)
		e2eRun(t, "init-random", "--config", "kimi-linear-nano", "--layout", "kimi_linear", "--dtype", dtype, "--out", dir)
		if probs := vllmProblems(t, spec, dir); len(probs) > 0 {
			t.Errorf("kimi-linear-nano (%s) would not load in vLLM's kimi_linear:\n  %s", dtype, strings.Join(probs, "\n  "))
		}
	}

	dir := filepath.Join(t.TempDir(), "k3")
	e2eRun(t, "init-random", "--config", "k3-nano", "--layout", "kimi_linear", "--out", dir)
	probs := vllmProblems(t, spec, dir)
	for _, want := range []string{"hidden_act", "attn_res_block_size", "routed_expert_hidden_size", "gate_lower_bound", "use_full_rank_gate", "mla_use_output_gate"} {
		if !slices.ContainsFunc(probs, func(p string) bool { return strings.Contains(p, want) }) {
			t.Errorf("k3-nano in the kimi_linear layout: no problem reported about %s: %v", want, probs)
		}
	}
	t.Logf("k3-nano in the kimi_linear layout, not loadable by vLLM's kimi_linear: %v", probs)
}
