package gguf

import (
	"cmp"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"sync"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// This file inverts Export: a GGUF file in llama.cpp's kimi-k3 or
// kimi-linear layout becomes a tessera model. Tensors are views into the
// memory-mapped file (no copy for F32, F16, BF16 and the block formats);
// the few tensors Export folds are unfolded into a small in-memory source:
//
//	<x>_res_score s → <x>_res_norm = s, <x>_res_proj = 1 (AttnRes scores
//	                  (x̂·γ)·w with γ = s, w = 1 equal x̂·(γ_orig·w_orig) up
//	                  to float rounding)
//	ssm_a = −exp(A_log) → A_log = log(−ssm_a), one value per head
//	attn_k_b [dn, r, H], attn_v_b [r, dv, H] → kv_b_proj [H·(dn+dv), r]
//	ffn_*_exps [.., .., E] → experts.{e}.w{1,3,2} (views of slice e)
//	output.weight → lm_head.weight (tie_word_embeddings false)
//
// The converted tensors are computed when the model first reads them
// (convSource), not on import: importing reads nothing past the header,
// and binding then reads the file front to back, so a browser binds the
// parts it has while the later ones download.

func init() { model.RegisterGGUF(OpenModel) }

// OpenModel opens a GGUF model file (see ImportCheckpoint) and binds it.
// Close the returned checkpoint when done with the model; it owns the
// file's mapping.
func OpenModel(path string) (*model.Model, *safetensors.Checkpoint, error) {
	f, err := Open(path)
	if err != nil {
		return nil, nil, err
	}
	m, ck, err := LoadModel(f, false)
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, ck, nil
}

// LoadModel imports f (ImportCheckpoint) and binds the model — with
// model.LoadDeferred when deferred (weights read later, one at a time, by
// a GPU runner), else model.Load. The checkpoint takes over f's source
// (closing the checkpoint closes it); on error f is closed. It is the one
// GGUF loader: natively over the memory-mapped file (OpenModel,
// engine.Open), in the browser over the fetched bytes (engine.LoadGGUF).
func LoadModel(f *File, deferred bool) (*model.Model, *safetensors.Checkpoint, error) {
	cfg, ck, err := ImportCheckpoint(f)
	if err != nil {
		f.Close()
		return nil, nil, err
	}
	f.closer = nil // owned by ck now
	ld := model.Load
	if deferred {
		ld = model.LoadDeferred
	}
	m, err := ld(cfg, ck)
	if err != nil {
		ck.Close()
		return nil, nil, err
	}
	return m, ck, nil
}

// ggufShard and convShard name the two sources of an imported checkpoint.
const (
	ggufShard = "model.gguf"
	convShard = "converted"
)

// modelTypes are the ggml tensor types a weight may have, with the
// tessera dtype they load as (block formats keep their raw blocks).
var modelTypes = map[GGMLType]tensor.DType{
	TypeF32: tensor.F32, TypeF16: tensor.F16, TypeBF16: tensor.BF16,
	TypeQ8_0: tensor.Q8_0, TypeQ4_0: tensor.Q4_0, TypeQ4_K: tensor.Q4K,
	TypeQ5_K: tensor.Q5K, TypeQ6_K: tensor.Q6K, TypeMXFP4: tensor.MXFP4,
	TypeQ4_1: tensor.Q4_1, TypeQ5_0: tensor.Q5_0, TypeQ5_1: tensor.Q5_1,
}

// supportedTypes lists modelTypes for error messages.
const supportedTypes = "F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K, MXFP4"

// ImportCheckpoint rebuilds the tessera configuration from f's
// hyperparameters and a checkpoint (kimi_linear names) whose tensors view
// f's data. Unknown tensor types and shapes that differ from what the
// hyperparameters imply are refused naming the tensor. The checkpoint
// reads f's source: keep f open while it is used, or hand the source over
// (OpenModel does).
func ImportCheckpoint(f *File) (*config.Config, *safetensors.Checkpoint, error) {
	cfg, err := importConfig(f)
	if err != nil {
		return nil, nil, err
	}
	for _, t := range f.Tensors {
		if _, ok := modelTypes[t.Type]; !ok {
			return nil, nil, fmt.Errorf("tensor %s: ggml type %s is not supported (supported: %s)", t.Name, t.Type, supportedTypes)
		}
	}
	if err := checkExperts(f, cfg); err != nil {
		return nil, nil, err
	}
	im := &importer{f: f, cfg: cfg, arch: f.Architecture()}
	for _, s := range model.Spec(cfg) {
		if err := im.bind(s); err != nil {
			return nil, nil, err
		}
	}
	src, ok := f.src.(safetensors.Source)
	if !ok {
		src = sizedSource{f.src, int64(f.size)}
	}
	srcs := map[string]safetensors.Source{ggufShard: src, convShard: &im.conv}
	ck, err := safetensors.Assemble(srcs, im.tensors, map[string]string{"format": "gguf"})
	if err != nil {
		return nil, nil, err
	}
	return cfg, ck, nil
}

// checkExperts requires every MoE layer's stacked expert tensors to hold
// the configured experts before model.Spec lists them one by one, so a
// header's expert and layer counts are bounded by the data in the file.
func checkExperts(f *File, cfg *config.Config) error {
	E, I, w := uint64(cfg.NumExperts), uint64(cfg.MoEIntermediateSize), uint64(cfg.ExpertWidth())
	for i := 0; i < cfg.NumHiddenLayers; i++ {
		if !cfg.IsMoE(i) {
			continue
		}
		for _, n := range []string{"ffn_gate_exps", "ffn_up_exps", "ffn_down_exps"} {
			name := fmt.Sprintf("blk.%d.%s.weight", i, n)
			g, ok := f.Tensor(name)
			if !ok {
				return fmt.Errorf("tensor %s: missing (%d experts configured)", name, E)
			}
			if len(g.Ne) != 3 || g.Ne[2] != E || g.NumElements() != E*I*w {
				return fmt.Errorf("tensor %s: shape %v, want %d experts of %d×%d", name, g.Ne, E, I, w)
			}
		}
	}
	return nil
}

// sizedSource adapts a Parse reader to safetensors.Source.
type sizedSource struct {
	io.ReaderAt
	n int64
}

func (s sizedSource) Size() int64 { return s.n }

// importer collects the checkpoint tensors of one file.
type importer struct {
	f       *File
	cfg     *config.Config
	arch    string
	tensors []*safetensors.Tensor
	conv    convSource // the converted tensors
}

// view adds name as a view of GGUF tensor g's bytes [off, off+size).
func (im *importer) view(name string, g *TensorInfo, shape []int, off, size uint64) {
	dt := modelTypes[g.Type].String()
	im.tensors = append(im.tensors, &safetensors.Tensor{Name: name, DType: safetensors.DType(dt), Shape: shape,
		Offset: int64(im.f.DataOffset + g.Offset + off), Size: int64(size), Shard: ggufShard})
}

// derived adds name as float32 data that conv computes when it is read.
func (im *importer) derived(name string, shape []int, conv func() ([]float32, error)) {
	n := int64(4 * numel(shape))
	im.tensors = append(im.tensors, &safetensors.Tensor{Name: name, DType: safetensors.F32, Shape: shape,
		Offset: im.conv.n, Size: n, Shard: convShard})
	im.conv.items = append(im.conv.items, convItem{off: im.conv.n, n: n, conv: conv})
	im.conv.n += n
}

// convSource holds the converted tensors end to end (safetensors.Source).
// Each is computed from the GGUF file when a read reaches it, and kept
// only until a read reaches its last byte: the model reads each once while
// it binds, in one read or in chunks (safetensors reads 1 MiB at a time
// where it converts), so each is computed once and nothing stays.
type convSource struct {
	n     int64
	items []convItem // by offset

	mu   sync.Mutex
	at   int       // the item whose values x holds
	x    []float32 // items[at]'s values until read to the end; nil: none
	runs int       // conversions run (tests)
}

// convItem is one converted tensor: n bytes at off, conv's values.
type convItem struct {
	off, n int64
	conv   func() ([]float32, error)
}

func (c *convSource) Size() int64 { return c.n }

func (c *convSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > c.n {
		return 0, fmt.Errorf("read at offset %d of %d converted bytes", off, c.n)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	end := min(c.n, off+int64(len(p)))
	i, _ := slices.BinarySearchFunc(c.items, off, func(it convItem, at int64) int { return cmp.Compare(it.off+it.n, at+1) })
	for ; i < len(c.items) && c.items[i].off < end; i++ {
		it := c.items[i]
		if c.at != i || c.x == nil {
			x, err := it.conv()
			if err != nil {
				return 0, err
			}
			if int64(4*len(x)) != it.n {
				return 0, fmt.Errorf("gguf import: internal: a conversion gave %d values, want %d", len(x), it.n/4)
			}
			c.at, c.x = i, x
			c.runs++
		}
		x := c.x
		lo, hi := max(off, it.off), min(end, it.off+it.n)
		if hi == it.off+it.n {
			c.x = nil // read to its end
		}
		for j := lo; j < hi; {
			k := (j - it.off) / 4
			var b [4]byte
			binary.LittleEndian.PutUint32(b[:], math.Float32bits(x[k]))
			j += int64(copy(p[j-off:hi-off], b[(j-it.off)%4:]))
		}
	}
	if n := int(end - off); n < len(p) {
		return n, io.EOF
	}
	return len(p), nil
}

// tensor looks up a GGUF tensor that must hold n elements.
func (im *importer) tensor(gname, what string, n int) (*TensorInfo, error) {
	g, ok := im.f.Tensor(gname)
	if !ok {
		return nil, fmt.Errorf("tensor %s: missing (needed for %s)", gname, what)
	}
	if g.NumElements() != uint64(n) {
		return nil, fmt.Errorf("tensor %s: shape %v has %d elements, want %d for %s", gname, g.Ne, g.NumElements(), n, what)
	}
	return g, nil
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// bind adds the checkpoint tensor(s) for spec tensor s.
func (im *importer) bind(s model.TensorSpec) error {
	name, shape := s.Name, s.Shape
	if name == "lm_head.weight" {
		return im.copy(name, "output.weight", shape)
	}
	m, ok := findRule(im.cfg, name)
	if !ok {
		return fmt.Errorf("tensor %s: no GGUF mapping in llama.cpp's %s", name, im.arch)
	}
	r, key, bid, expert := m.r, m.key, m.bid, m.expert
	gname := bid + r.gguf
	switch r.op {
	case opCopy, opConv1d:
		return im.copy(name, gname, shape)
	case opResScore:
		if key == r.pair { // …_res_proj: ones
			im.derived(name, shape, func() ([]float32, error) {
				x := make([]float32, numel(shape))
				for i := range x {
					x[i] = 1
				}
				return x, nil
			})
			return nil
		}
		return im.copy(name, gname, shape)
	case opALog:
		g, err := im.tensor(gname, name, im.cfg.KDAHeads)
		if err != nil {
			return err
		}
		im.derived(name, shape, func() ([]float32, error) {
			a, err := im.f.Float32(g.Name)
			if err != nil {
				return nil, err
			}
			for i, v := range a {
				if !(v < 0) {
					return nil, fmt.Errorf("tensor %s: element %d is %v; ssm_a = −exp(A_log) must be negative", gname, i, v)
				}
				a[i] = float32(math.Log(float64(-v)))
			}
			return a, nil
		})
		return nil
	case opSplitKVB:
		return im.kvb(name, bid+r.gguf, bid+r.pair, shape)
	case opExperts:
		E := im.cfg.NumExperts
		g, err := im.tensor(gname, name, E*numel(shape))
		if err != nil {
			return err
		}
		if len(g.Ne) != 3 || g.Ne[0] != uint64(shape[1]) || g.Ne[1] != uint64(shape[0]) {
			return fmt.Errorf("tensor %s: shape %v, want [%d %d %d]", gname, g.Ne, shape[1], shape[0], E)
		}
		if _, blocked := blockedType(g.Type); !blocked && g.Type != TypeF32 && g.Type != TypeF16 && g.Type != TypeBF16 {
			return fmt.Errorf("tensor %s: ggml type %s is not supported", gname, g.Type)
		}
		per := g.Size / uint64(E)
		im.view(name, g, shape, uint64(expert)*per, per)
		return nil
	}
	return fmt.Errorf("gguf import: internal: unknown conversion %d for %s", r.op, name)
}

// blockedType reports whether t loads as a tessera block format.
func blockedType(t GGMLType) (tensor.DType, bool) {
	dt, ok := modelTypes[t]
	return dt, ok && dt.Blocked()
}

// copy binds name to GGUF tensor gname of the same elements: a view for
// matrices and for float vectors, converted float32 for a quantized vector.
func (im *importer) copy(name, gname string, shape []int) error {
	g, err := im.tensor(gname, name, numel(shape))
	if err != nil {
		return err
	}
	if len(shape) == 2 && shape[0] > 1 && (len(g.Ne) < 2 || g.Ne[0] != uint64(shape[1])) {
		return fmt.Errorf("tensor %s: shape %v, want ne[0] = %d for %s %v", gname, g.Ne, shape[1], name, shape)
	}
	if _, blocked := blockedType(g.Type); blocked && (len(shape) != 2 || shape[0] == 1) {
		im.derived(name, shape, func() ([]float32, error) { return im.f.Float32(gname) })
		return nil
	}
	im.view(name, g, shape, 0, g.Size)
	return nil
}

// kvb rebuilds kv_b_proj: row h·(dn+dv)+i (i < dn) is attn_k_b's [·, ·, h]
// column i over r; row h·(dn+dv)+dn+j is attn_v_b's row j of head h.
func (im *importer) kvb(name, kName, vName string, shape []int) error {
	H, dn, dv, r := im.cfg.NumHeads, im.cfg.QKNopeHeadDim, im.cfg.VHeadDim, im.cfg.KVLoraRank
	kg, err := im.tensor(kName, name, H*r*dn)
	if err != nil {
		return err
	}
	vg, err := im.tensor(vName, name, H*dv*r)
	if err != nil {
		return err
	}
	if kg.Ne[0] != uint64(dn) || vg.Ne[0] != uint64(r) {
		return fmt.Errorf("tensors %s %v and %s %v: want ne [%d %d %d] and [%d %d %d]", kName, kg.Ne, vName, vg.Ne, dn, r, H, r, dv, H)
	}
	im.derived(name, shape, func() ([]float32, error) {
		k, err := im.f.Float32(kName)
		if err != nil {
			return nil, err
		}
		v, err := im.f.Float32(vName)
		if err != nil {
			return nil, err
		}
		w := make([]float32, H*(dn+dv)*r)
		for h := 0; h < H; h++ {
			for i := 0; i < dn; i++ {
				row := w[(h*(dn+dv)+i)*r:]
				for j := 0; j < r; j++ {
					row[j] = k[(h*r+j)*dn+i]
				}
			}
			copy(w[(h*(dn+dv)+dn)*r:(h+1)*(dn+dv)*r], v[h*dv*r:(h+1)*dv*r])
		}
		return w, nil
	})
	return nil
}

// meta reads "{arch}.key" or a general key as an unsigned integer.
func (im *importer) meta(key string) (int, bool, error) {
	v, ok := im.f.Get(key)
	if !ok {
		return 0, false, nil
	}
	switch x := v.(type) {
	case uint32:
		return int(x), true, nil
	case int32:
		return int(x), true, nil
	case uint64:
		if x <= math.MaxInt32 {
			return int(x), true, nil
		}
	case int64:
		if x >= 0 && x <= math.MaxInt32 {
			return int(x), true, nil
		}
	}
	return 0, true, fmt.Errorf("key %s: %v (%T) is not a small unsigned integer", key, v, v)
}

// importConfig rebuilds a kimi_linear config.json from f's hyperparameters
// and the presence of optional tensors, and parses it.
func importConfig(f *File) (*config.Config, error) {
	arch := f.Architecture()
	if arch != ArchKimiK3 && arch != ArchKimiLinear {
		return nil, fmt.Errorf("general.architecture %q: want %s or %s", arch, ArchKimiK3, ArchKimiLinear)
	}
	im := &importer{f: f, arch: arch}
	m := map[string]any{"model_type": "kimi_linear", "tie_word_embeddings": false, "moe_layer_freq": 1,
		"moe_router_activation_func": "sigmoid", "mla_use_nope": true, "use_grouped_topk": false}
	var err error
	need := func(key, field string) int {
		if err != nil {
			return 0
		}
		v, ok, e := im.meta(arch + "." + key)
		if e != nil {
			err = e
		} else if !ok {
			err = fmt.Errorf("key %s.%s: missing", arch, key)
		}
		if field != "" {
			m[field] = v
		}
		return v
	}
	opt := func(key, field string) {
		if err != nil {
			return
		}
		v, ok, e := im.meta(arch + "." + key)
		if e != nil {
			err = e
		} else if ok {
			m[field] = v
		}
	}
	float := func(key, field string, required bool) {
		if err != nil {
			return
		}
		v, ok := f.Get(arch + "." + key)
		if !ok {
			if required {
				err = fmt.Errorf("key %s.%s: missing", arch, key)
			}
			return
		}
		x, isF := v.(float32)
		if !isF {
			err = fmt.Errorf("key %s.%s: %T, want float32", arch, key, v)
			return
		}
		m[field] = float64(x)
	}
	need("vocab_size", "vocab_size")
	need("embedding_length", "hidden_size")
	L := need("block_count", "num_hidden_layers")
	need("feed_forward_length", "intermediate_size")
	H := need("attention.head_count", "num_attention_heads")
	m["num_key_value_heads"] = H
	opt("context_length", "max_position_embeddings")
	float("attention.layer_norm_rms_epsilon", "rms_norm_eps", true)
	need("expert_count", "num_experts")
	need("expert_used_count", "num_experts_per_token")
	need("expert_feed_forward_length", "moe_intermediate_size")
	need("expert_shared_count", "num_shared_experts")
	need("leading_dense_block_count", "first_k_dense_replace")
	float("expert_weights_scale", "routed_scaling_factor", true)
	opt("attention.q_lora_rank", "q_lora_rank")
	need("attention.kv_lora_rank", "kv_lora_rank")
	dr := need("rope.dimension_count", "qk_rope_head_dim")
	kl := need("attention.key_length_mla", "")
	m["qk_nope_head_dim"] = kl - dr
	need("attention.value_length_mla", "v_head_dim")
	la := map[string]any{"num_heads": H}
	m["linear_attn_config"] = la
	la["head_dim"] = need("kda.head_dim", "")
	la["short_conv_kernel_size"] = need("ssm.conv_kernel", "")
	if err != nil {
		return nil, err
	}
	if g, ok := f.Get(arch + ".expert_gating_func"); ok && fmt.Sprint(g) != fmt.Sprint(expertGatingSigmoid) {
		return nil, fmt.Errorf("key %s.expert_gating_func: %v, want %d (sigmoid)", arch, g, expertGatingSigmoid)
	}
	kv, ok := f.Get(arch + ".attention.head_count_kv")
	kinds, isArr := kv.([]int32)
	if !ok || !isArr || len(kinds) != L {
		return nil, fmt.Errorf("key %s.attention.head_count_kv: want %d int32 values (1 on MLA layers, 0 on KDA layers), found %T", arch, L, kv)
	}
	var kda, full []int
	for i, k := range kinds {
		switch k {
		case 0:
			kda = append(kda, i+1)
		case 1:
			full = append(full, i+1)
		default:
			return nil, fmt.Errorf("key %s.attention.head_count_kv: layer %d has %d, want 0 (KDA) or 1 (MLA)", arch, i, k)
		}
	}
	la["kda_layers"], la["full_attn_layers"] = kda, full
	has := func(suffix string) bool {
		for _, t := range f.Tensors {
			if strings.HasSuffix(t.Name, suffix) {
				return true
			}
		}
		return false
	}
	la["use_full_rank_gate"] = has(".ssm_g.weight")
	m["mla_use_output_gate"] = has(".attn_gate.weight")
	m["latent_moe_use_norm"] = has(".ffn_routed_norm.weight")
	m["hidden_act"] = "silu"
	m["moe_renormalize"] = true
	if arch == ArchKimiK3 {
		m["hidden_act"] = "situ"
		float("activation.situ_beta", "activation_situ_beta", true)
		float("activation.situ_linear_beta", "activation_situ_linear_beta", true)
		opt("attn_res.block_size", "attn_res_block_size")
		opt("expert_latent_length", "routed_expert_hidden_size")
		if lb, ok := f.Get(arch + ".kda.gate_lower_bound"); ok {
			x, isF := lb.(float32)
			if !isF {
				return nil, fmt.Errorf("key %s.kda.gate_lower_bound: %T, want float32", arch, lb)
			}
			la["gate_lower_bound"] = float64(x)
		}
		if v, ok := f.Get(arch + ".expert_weights_norm"); ok {
			b, isB := v.(bool)
			if !isB {
				return nil, fmt.Errorf("key %s.expert_weights_norm: %T, want bool", arch, v)
			}
			m["moe_renormalize"] = b
		}
		if err != nil {
			return nil, err
		}
	}
	for _, k := range []struct{ key, field string }{{"tokenizer.ggml.bos_token_id", "bos_token_id"}, {"tokenizer.ggml.eos_token_id", "eos_token_id"}} {
		v, ok, e := im.meta(k.key)
		if e != nil {
			return nil, e
		}
		if ok {
			m[k.field] = v
		}
	}
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("hyperparameters: %w", err)
	}
	return cfg, nil
}
