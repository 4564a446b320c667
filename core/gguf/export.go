package gguf

import (
	"context"
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/core/atomicfile"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// ExportOptions controls Export.
type ExportOptions struct {
	// Type is the weight type: "f32", "f16", "bf16", "q8_0", "q4_0",
	// "q4_k" or "mxfp4". Vectors, norms, conv taps, the router and biases
	// stay F32 (as llama.cpp's converter keeps them); with a block type a
	// matrix whose rows are not a whole number of blocks is written Q8_0
	// (rows a multiple of 32) or F16. With mxfp4 only
	// the routed experts are MXFP4 and the other matrices Q8_0, as
	// llama.cpp's MXFP4_MOE file type has them.
	Type string
	// NoVocab writes an id-only vocabulary (tokenizer.ggml.model "none")
	// even when the model directory has a tokenizer.json.
	NoVocab bool
	// Name is general.name; empty: the model directory's base name.
	Name string
	// Context, when set, cancels the export between tensors; the partial
	// file is removed.
	Context context.Context
}

// RefusedError is a model feature the GGUF layout llama.cpp loads cannot
// represent; Feature names the config field or tensor.
type RefusedError struct {
	Feature string
	Reason  string
}

func (e *RefusedError) Error() string {
	return fmt.Sprintf("gguf export: %s: %s", e.Feature, e.Reason)
}

func refuse(feature, format string, args ...any) error {
	return &RefusedError{Feature: feature, Reason: fmt.Sprintf(format, args...)}
}

// exportTypes maps ExportOptions.Type to the tensor type of weight matrices.
var exportTypes = map[string]GGMLType{"f32": TypeF32, "f16": TypeF16, "bf16": TypeBF16, "q8_0": TypeQ8_0, "q4_0": TypeQ4_0, "mxfp4": TypeMXFP4, "q4_k": TypeQ4_K}

// Export converts the tessera model in modelDir (config.json + safetensors,
// either layout) into a GGUF file at outPath in llama.cpp's layout: arch
// kimi-k3 when the model uses SiTU, Block AttnRes, LatentMoE or K3's KDA
// gates, else kimi-linear. The vision tower is not exported. Features GGUF
// cannot hold are refused by name (RefusedError). The file is written to a
// temporary file in outPath's directory and renamed into place, so a failed
// or cancelled export leaves nothing at outPath.
func Export(modelDir, outPath string, opt ExportOptions) error {
	target, ok := exportTypes[strings.ToLower(opt.Type)]
	if !ok {
		return fmt.Errorf("gguf export: type %q: want f32, f16, bf16, q8_0, q4_0, q4_k or mxfp4", opt.Type)
	}
	ctx := opt.Context
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := config.Load(modelDir)
	if err != nil {
		return err
	}
	arch, err := chooseArch(cfg)
	if err != nil {
		return err
	}
	ck, err := safetensors.OpenDir(modelDir)
	if err != nil {
		return fmt.Errorf("%s: %w", modelDir, err)
	}
	defer ck.Close()
	if _, err := model.LoadDeferred(cfg, ck); err != nil { // names and shapes
		return fmt.Errorf("%s: %w", modelDir, err)
	}
	name := opt.Name
	if name == "" {
		abs, _ := filepath.Abs(modelDir)
		name = filepath.Base(abs)
	}
	w := NewWriter()
	if err := addMetadata(w, cfg, arch, target, name); err != nil {
		return err
	}
	if err := addVocab(w, modelDir, cfg, opt.NoVocab); err != nil {
		return err
	}
	c := &converter{cfg: cfg, ck: ck, arch: arch, target: target, ctx: ctx}
	if cfg.Layout == config.LayoutKimiK3 {
		c.prefix = "language_model."
	}
	if err := c.plan(w); err != nil {
		return err
	}
	return writeAtomic(outPath, w)
}

// chooseArch picks llama.cpp's architecture for cfg and refuses what
// it cannot represent.
func chooseArch(c *config.Config) (string, error) {
	switch c.Layout {
	case config.LayoutQwen3Next:
		return chooseQwen3Next(c)
	case config.LayoutDeepSeekV3:
		return chooseDeepSeek2(c)
	}
	k3 := c.SiTU || c.AttnResBlockSize > 0 || c.RoutedExpertHiddenSize > 0 || c.FullRankGate || c.GateBounded || c.MLAOutputGate
	arch := ArchKimiLinear
	if k3 {
		arch = ArchKimiK3
	}
	switch {
	case c.Quant != "":
		return "", refuse("quantization_config", "quantized (%s) checkpoints are not exported; export the float model", c.Quant)
	case c.KDAHeads != c.NumHeads:
		return "", refuse("linear_attn_config.num_heads", "%d KDA heads differ from num_attention_heads %d; llama.cpp has one head count for KDA and MLA", c.KDAHeads, c.NumHeads)
	case c.NumExperts == 0:
		return "", refuse("num_experts", "0 (a dense-only model); llama.cpp's %s has MoE layers after leading_dense_block_count", arch)
	case c.NumExpertGroup > 1 && c.NumExpertGroup > c.TopKGroup:
		return "", refuse("num_expert_group", "%d groups with topk_group %d: group-limited routing changes which experts are chosen and llama.cpp's %s has no expert groups", c.NumExpertGroup, c.TopKGroup, arch)
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		if c.IsMoE(i) != (i >= c.FirstKDenseReplace) {
			return "", refuse("moe_layer_freq", "%d makes layer %d dense; llama.cpp uses MoE in every layer from first_k_dense_replace (%d) on", c.MoELayerFreq, i, c.FirstKDenseReplace)
		}
	}
	if k3 {
		if !c.SiTU {
			return "", refuse("hidden_act", "silu with K3 features (AttnRes, LatentMoE or K3 KDA gates): llama.cpp's kimi-k3 runs SiTU-GLU only")
		}
		if !c.FullRankGate {
			return "", refuse("linear_attn_config.use_full_rank_gate", "false (low-rank g_a/g_b KDA output gate) with K3 features: llama.cpp's kimi-k3 needs the full-rank gate")
		}
		return arch, nil
	}
	if c.QLoraRank > 0 {
		return "", refuse("q_lora_rank", "%d: llama.cpp's kimi-linear reads no q_lora_rank (its MLA takes a direct q_proj)", c.QLoraRank)
	}
	if !c.Renormalize || c.TopK < 2 {
		return "", refuse("moe_renormalize", "routing weights not renormalised (moe_renormalize %v, top-k %d): llama.cpp's kimi-linear always renormalises", c.Renormalize, c.TopK)
	}
	return arch, nil
}

// chooseQwen3Next refuses the Qwen3-Next configs llama.cpp's qwen3next
// cannot run as tessera does.
func chooseQwen3Next(c *config.Config) (string, error) {
	switch {
	case c.LinearKeyHeadDim != c.LinearValueHeadDim:
		return "", refuse("linear_value_head_dim", "%d differs from linear_key_head_dim %d: llama.cpp's qwen3next has one GDN head size (ssm.state_size)", c.LinearValueHeadDim, c.LinearKeyHeadDim)
	case qwenFullInterval(c) == 0:
		return "", refuse("layer_types", "full attention is not exactly every n-th layer: llama.cpp's qwen3next reads full_attention_interval")
	case c.SharedExpertIntermediateSize == 0:
		return "", refuse("shared_expert_intermediate_size", "0 (no shared expert): llama.cpp's qwen3next requires the gated shared expert")
	case !c.Renormalize:
		return "", refuse("norm_topk_prob", "false: llama.cpp's qwen3next always renormalises the top-k weights")
	case c.RopeScaling != nil:
		return "", refuse("rope_scaling", "YaRN scaling of a qwen3_next model is not exported (not checked against llama.cpp's qwen3next)")
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		if !c.IsMoE(i) {
			return "", refuse("mlp_only_layers", "layer %d is dense: llama.cpp's qwen3next has an MoE block in every layer", i)
		}
	}
	return ArchQwen3Next, nil
}

// chooseDeepSeek2 refuses the DeepSeek-V3 configs llama.cpp's deepseek2
// cannot run as tessera does.
func chooseDeepSeek2(c *config.Config) (string, error) {
	switch {
	case c.NumExperts == 0:
		return "", refuse("n_routed_experts", "0 (a dense-only model); llama.cpp's deepseek2 has MoE layers after leading_dense_block_count")
	case c.NumSharedExperts == 0:
		return "", refuse("n_shared_experts", "0: llama.cpp's deepseek2 requires the shared experts")
	case !c.RopeInterleave:
		return "", refuse("rope_interleave", "false (rotate-half pairs): llama.cpp's deepseek2 rotates adjacent pairs, as DeepSeek's checkpoints store them")
	}
	if y := c.RopeScaling; y != nil && y.Factor > 1 && (y.AttentionFactor != 0 || y.MScale != y.MScaleAllDim) {
		return "", refuse("rope_scaling", "mscale %g, mscale_all_dim %g, attention_factor %g: only mscale = mscale_all_dim (cos/sin unscaled, as DeepSeek-V3 has it) is exported", y.MScale, y.MScaleAllDim, y.AttentionFactor)
	}
	for i := 0; i < c.NumHiddenLayers; i++ {
		if c.IsMoE(i) != (i >= c.FirstKDenseReplace) {
			return "", refuse("moe_layer_freq", "%d makes layer %d dense; llama.cpp uses MoE in every layer from first_k_dense_replace (%d) on", c.MoELayerFreq, i, c.FirstKDenseReplace)
		}
	}
	return ArchDeepSeek2, nil
}

// addMetadata writes general.* and the hyperparameter keys.
func addMetadata(w *Writer, cfg *config.Config, arch string, target GGMLType, name string) error {
	kvs := []KV{
		{"general.architecture", arch},
		{"general.type", "model"},
		{"general.name", name},
		{"general.file_type", fileTypes[target]},
		{"general.quantization_version", uint32(2)},
	}
	fam := familyOf(arch)
	for _, h := range hparams {
		if (h.k3Only && arch != ArchKimiK3) || !h.fam.has(fam) {
			continue
		}
		if v := h.value(cfg); v != nil {
			kvs = append(kvs, KV{arch + "." + h.key, v})
		}
	}
	for _, kv := range kvs {
		if err := w.Add(kv.Key, kv.Value); err != nil {
			return err
		}
	}
	return nil
}

// converter turns checkpoint tensors into GGUF tensors.
type converter struct {
	cfg    *config.Config
	ck     *safetensors.Checkpoint
	prefix string // checkpoint name prefix of the layout
	arch   string
	target GGMLType
	ctx    context.Context
}

// out is one GGUF tensor to write.
type out struct {
	name string
	ne   []uint64
	load func() ([]float32, error)
}

// plan adds every tensor of the model (model.Spec order) to w.
func (c *converter) plan(w *Writer) error {
	done := map[string]bool{}
	var outs []out
	for _, s := range model.Spec(c.cfg) {
		o, err := c.convert(s.Name, done)
		if err != nil {
			return err
		}
		outs = append(outs, o...)
	}
	if c.cfg.TieWordEmbed { // llama.cpp's kimi archs need output.weight
		d, V := uint64(c.cfg.HiddenSize), uint64(c.cfg.VocabSize)
		outs = append(outs, out{name: "output.weight", ne: []uint64{d, V}, load: c.read("model.embed_tokens.weight")})
	}
	for _, o := range outs {
		typ := c.tensorType(o)
		load := o.load
		err := w.AddTensor(o.name, typ, o.ne, func() ([]byte, error) {
			if err := c.ctx.Err(); err != nil {
				return nil, err
			}
			x, err := load()
			if err != nil {
				return nil, err
			}
			if err := checkFinite(x); err != nil {
				return nil, err
			}
			return Encode(typ, x)
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// tensorType follows llama.cpp's converter: 1-D tensors, norms, names not
// ending in ".weight" and f32Names stay F32; Q8_0 falls back to F16 for
// rows that are not a multiple of 32. One departure: the 3-D attn_k_b of
// an F16 or Q8_0 file is written F32, because llama.cpp 0ad4a86 places an
// F16/Q8_0 attn_k_b in its AMX buffer on CPUs with AMX and then aborts
// building the graph (GGML_ASSERT(*cur_backend_id != -1)); the tensor is
// small (kv_lora_rank × H × qk_nope_head_dim).
func (c *converter) tensorType(o out) GGMLType {
	if c.target == TypeF32 || len(o.ne) == 1 || strings.HasSuffix(o.name, "_norm.weight") || !strings.HasSuffix(o.name, ".weight") {
		return TypeF32
	}
	if (c.target == TypeF16 || c.target == TypeQ8_0) && strings.HasSuffix(o.name, ".attn_k_b.weight") {
		return TypeF32
	}
	for _, n := range f32Names {
		if strings.HasSuffix(o.name, "."+n) {
			return TypeF32
		}
	}
	if bs := c.target.BlockSize(); bs > 1 && o.ne[0]%bs != 0 {
		if o.ne[0]%q80Block == 0 {
			return TypeQ8_0
		}
		return TypeF16
	}
	if c.target == TypeMXFP4 && !strings.HasSuffix(o.name, "_exps.weight") {
		return TypeQ8_0
	}
	return c.target
}

// checkFinite refuses NaN and ±Inf weights (the writer names the tensor).
func checkFinite(x []float32) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("element %d is %v; refusing to export non-finite weights", i, v)
		}
	}
	return nil
}

// read loads a checkpoint tensor (name without the layout prefix).
func (c *converter) read(name string) func() ([]float32, error) {
	return func() ([]float32, error) { return c.ck.Float32(c.prefix + name) }
}

// shapeOf is the checkpoint shape of a tensor (name without prefix).
func (c *converter) shapeOf(name string) []int {
	t, ok := c.ck.Tensor(c.prefix + name)
	if !ok {
		return nil
	}
	return t.Shape
}

// reversed turns a PyTorch shape into ggml's ne.
func reversed(shape []int) []uint64 {
	ne := make([]uint64, len(shape))
	for i, d := range shape {
		ne[len(shape)-1-i] = uint64(d)
	}
	return ne
}

// match is where a tessera tensor sits in the rule tables: its rule, its
// decoder layer (−1 outside the layers) with the GGUF prefix "blk.{i}.",
// its layer-relative key ("experts.*" for an expert) and expert index.
type match struct {
	r      rule
	layer  int
	bid    string
	key    string
	expert int
}

// findRule finds the rule of tessera tensor name (without the layout
// prefix) for cfg's layer kinds; ok is false when no rule maps it.
func findRule(cfg *config.Config, name string) (m match, ok bool) {
	m.layer, m.key, m.expert = -1, name, -1
	if rest, found := strings.CutPrefix(name, "model.layers."); found {
		dot := strings.IndexByte(rest, '.')
		if dot < 0 {
			return m, false
		}
		if _, err := fmt.Sscanf(rest[:dot], "%d", &m.layer); err != nil || m.layer < 0 || m.layer >= len(cfg.Kinds) {
			return m, false
		}
		m.key, m.bid = rest[dot+1:], fmt.Sprintf("blk.%d.", m.layer)
	}
	if i := strings.Index(m.key, "experts."); i >= 0 && !strings.Contains(m.key, "shared_experts.") {
		rest := m.key[i+len("experts."):]
		if dot := strings.IndexByte(rest, '.'); dot > 0 {
			fmt.Sscanf(rest[:dot], "%d", &m.expert)
			m.key = m.key[:i] + "experts.*" + rest[dot:]
		}
	}
	rules := modelRules
	if m.layer >= 0 {
		rules = layerRules
	}
	fam := famKimi
	switch cfg.Layout {
	case config.LayoutQwen3Next:
		fam = famQwen3Next
	case config.LayoutDeepSeekV3:
		fam = famDeepSeek2
	}
	for _, r := range rules {
		if (r.hf != m.key && !(r.op == opResScore && r.pair == m.key)) || !r.fam.has(fam) {
			continue
		}
		if m.layer >= 0 && r.only != anyLayer && (r.only == kdaOnly) != (cfg.Kinds[m.layer] == config.KDA) {
			continue
		}
		m.r = r
		return m, true
	}
	return m, false
}

// convert maps one tessera tensor; done records GGUF names already
// produced (a pair or an expert stack covers several tessera tensors).
func (c *converter) convert(name string, done map[string]bool) ([]out, error) {
	m, ok := findRule(c.cfg, name)
	if !ok {
		return nil, refuse(c.prefix+name, "no GGUF mapping for this tensor in llama.cpp's %s", c.arch)
	}
	gname := m.bid + m.r.gguf
	if done[gname] {
		return nil, nil
	}
	done[gname] = true
	return c.apply(m.r, m.layer, m.bid, gname, name)
}

// apply builds the GGUF tensor(s) of rule r for tessera tensor name.
func (c *converter) apply(r rule, layer int, bid, gname, name string) ([]out, error) {
	lp := ""
	if layer >= 0 {
		lp = fmt.Sprintf("model.layers.%d.", layer)
	}
	shape := c.shapeOf(name)
	switch r.op {
	case opCopy:
		return []out{{name: gname, ne: reversed(shape), load: c.read(name)}}, nil
	case opConv1d: // [C, 1, K] (or [C, K]) → ne [K, 1, C, 1]
		C, K := shape[0], shape[len(shape)-1]
		return []out{{name: gname, ne: []uint64{uint64(K), 1, uint64(C), 1}, load: c.read(name)}}, nil
	case opALog:
		return c.aLog(gname, name)
	case opPlusOne:
		return []out{{name: gname, ne: reversed(shape), load: func() ([]float32, error) {
			x, err := c.read(name)()
			for i := range x {
				x[i]++
			}
			return x, err
		}}}, nil
	case opConv2D: // [C, 1, K] → ne [K, C]
		C, K := shape[0], shape[len(shape)-1]
		return []out{{name: gname, ne: []uint64{uint64(K), uint64(C)}, load: c.read(name)}}, nil
	case opFlat:
		n := 1
		for _, d := range shape {
			n *= d
		}
		return []out{{name: gname, ne: []uint64{uint64(n)}, load: c.read(name)}}, nil
	case opResScore:
		norm, proj := lp+r.hf, lp+r.pair
		d := uint64(c.cfg.HiddenSize)
		return []out{{name: gname, ne: []uint64{d}, load: func() ([]float32, error) {
			a, err := c.read(norm)()
			if err != nil {
				return nil, err
			}
			b, err := c.read(proj)()
			if err != nil {
				return nil, err
			}
			for i := range a {
				a[i] *= b[i]
			}
			return a, nil
		}}}, nil
	case opSplitKVB:
		return c.splitKVB(bid+r.gguf, bid+r.pair, name), nil
	case opExperts:
		E := c.cfg.NumExperts
		names := make([]string, E)
		for e := range names {
			names[e] = lp + strings.Replace(r.hf, "*", fmt.Sprint(e), 1)
		}
		ne := append(reversed(shape), uint64(E))
		return []out{{name: gname, ne: ne, load: func() ([]float32, error) {
			var all []float32
			for _, n := range names {
				x, err := c.read(n)()
				if err != nil {
					return nil, err
				}
				all = append(all, x...)
			}
			return all, nil
		}}}, nil
	}
	return nil, fmt.Errorf("gguf export: internal: unknown conversion %d for %s", r.op, name)
}

// aLog stores −exp(A_log), one value per head: ne [H] for kimi-k3, [1, H,
// 1, 1] for kimi-linear (as their loaders expect). A per-channel A_log is
// accepted only when it is constant within each head.
func (c *converter) aLog(gname, name string) ([]out, error) {
	H, dk := c.cfg.KDAHeads, c.cfg.KDAHeadDim
	if c.arch == ArchQwen3Next { // Gated DeltaNet: one A_log per value head
		H, dk = c.cfg.LinearValueHeads, 1
	}
	x, err := c.read(name)()
	if err != nil {
		return nil, err
	}
	if len(x) == H*dk && dk > 1 {
		for h := 0; h < H; h++ {
			for j := 1; j < dk; j++ {
				if x[h*dk+j] != x[h*dk] {
					return nil, refuse(c.prefix+name, "per-channel A_log (%d values, head %d not constant) cannot be stored: llama.cpp's ssm_a holds one value per head", len(x), h)
				}
			}
		}
		y := make([]float32, H)
		for h := range y {
			y[h] = x[h*dk]
		}
		x = y
	}
	if len(x) != H {
		return nil, refuse(c.prefix+name, "%d values, want one per head (%d)", len(x), H)
	}
	for i, v := range x {
		x[i] = float32(-math.Exp(float64(v)))
	}
	ne := []uint64{uint64(H)}
	if c.arch == ArchKimiLinear {
		ne = []uint64{1, uint64(H), 1, 1}
	}
	return []out{{name: gname, ne: ne, load: func() ([]float32, error) { return x, nil }}}, nil
}

// splitKVB splits kv_b_proj [H·(dn+dv), r] into attn_k_b, ne [dn, r, H]
// (each head's key block transposed), and attn_v_b, ne [r, dv, H].
func (c *converter) splitKVB(kName, vName, name string) []out {
	H, dn, dv, r := c.cfg.NumHeads, c.cfg.QKNopeHeadDim, c.cfg.VHeadDim, c.cfg.KVLoraRank
	src := c.read(name)
	kb := func() ([]float32, error) {
		w, err := src()
		if err != nil {
			return nil, err
		}
		o := make([]float32, H*r*dn)
		for h := 0; h < H; h++ {
			for i := 0; i < dn; i++ {
				row := w[(h*(dn+dv)+i)*r:]
				for j := 0; j < r; j++ {
					o[(h*r+j)*dn+i] = row[j]
				}
			}
		}
		return o, nil
	}
	vb := func() ([]float32, error) {
		w, err := src()
		if err != nil {
			return nil, err
		}
		o := make([]float32, 0, H*dv*r)
		for h := 0; h < H; h++ {
			base := (h*(dn+dv) + dn) * r
			o = append(o, w[base:base+dv*r]...)
		}
		return o, nil
	}
	return []out{
		{name: kName, ne: []uint64{uint64(dn), uint64(r), uint64(H)}, load: kb},
		{name: vName, ne: []uint64{uint64(r), uint64(dv), uint64(H)}, load: vb},
	}
}

// writeAtomic writes w to a temporary file next to path, syncs it and
// renames it into place; on any error the temporary file is removed.
func writeAtomic(path string, w *Writer) (err error) {
	dir := filepath.Dir(path)
	if st, serr := os.Stat(dir); serr != nil || !st.IsDir() {
		return fmt.Errorf("gguf export: output directory %s does not exist (create it first)", dir)
	}
	err = atomicfile.Write(path, 0o644, func(f io.Writer) error {
		_, err := w.WriteTo(f)
		return err
	})
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("gguf export: cancelled: %w", err)
	}
	if err != nil {
		return fmt.Errorf("gguf export: writing %s: %w", path, err)
	}
	return nil
}
