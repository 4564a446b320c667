package model

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unsafe"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/core/vision"
)

// Load binds the tensors of ck to a model of configuration cfg. Every
// expected tensor must be present with its exact shape; a tensor the model
// does not use is an error, except vision tensors in a checkpoint whose
// config has no vision_config (text-only use). With a vision_config the
// vision tower is loaded too. F32
// tensors of a memory-mapped checkpoint are used in place; F16/BF16 matrices
// stay half precision.
func Load(cfg *config.Config, ck *safetensors.Checkpoint) (*Model, error) {
	return load(cfg, ck, false)
}

// LoadDeferred is Load with every weight matrix deferred (tensor.Mat.Fetch):
// shapes and dtypes are checked as by Load, vectors and the vision tower
// are loaded, but matrix data stays in the checkpoint until something
// resolves it. A GPU runner built from the model then uploads one matrix at
// a time, so memory never holds the whole checkpoint (the browser reads it
// from JavaScript memory, outside the 4 GiB wasm heap). The embedding
// table stays loaded when the model has a vision tower (image features are
// fused into text embeddings on the host). The CPU runner refuses a
// deferred model: ck must stay open while the model is used.
func LoadDeferred(cfg *config.Config, ck *safetensors.Checkpoint) (*Model, error) {
	return load(cfg, ck, true)
}

func load(cfg *config.Config, ck *safetensors.Checkpoint, deferred bool) (*Model, error) {
	b := &binder{ck: ck, used: map[string]bool{}, q8: cfg.Quant == "q8", deferred: deferred}
	if cfg.Layout == config.LayoutKimiK3 {
		b.prefix = "language_model."
	}
	m := &Model{Cfg: cfg, Deferred: deferred}
	b.model(m)
	if b.err != nil {
		return nil, b.err
	}
	if cfg.Vision != nil {
		vc, err := vision.ParseConfig(cfg.Vision, cfg.HiddenSize)
		if err != nil {
			return nil, err
		}
		if m.Vision, err = vision.Load(vc, ck); err != nil {
			return nil, err
		}
		m.VisionCfg = vc
	}
	var extra []string
	for _, n := range ck.Names() {
		if b.used[n] || ignorable(n) || familyIgnorable(cfg, n) {
			continue
		}
		extra = append(extra, n)
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		more := ""
		if len(extra) > 5 {
			more = fmt.Sprintf(" and %d more", len(extra)-5)
			extra = extra[:5]
		}
		return nil, fmt.Errorf("checkpoint has tensors the %s config does not use: %s%s", cfg.Layout, strings.Join(extra, ", "), more)
	}
	return m, nil
}

// model binds the model-level tensors and every layer.
func (b *binder) model(m *Model) {
	cfg := m.Cfg
	d, V := cfg.HiddenSize, cfg.VocabSize
	keep := b.deferred
	b.deferred = b.deferred && cfg.Vision == nil // image fusion reads the table on the host
	m.EmbedTokens = b.mat("model.embed_tokens.weight", V, d)
	b.deferred = keep
	m.Norm = b.vec("model.norm.weight", d)
	if cfg.TieWordEmbed {
		m.LMHead = m.EmbedTokens
		b.optional("lm_head.weight")
	} else {
		m.LMHead = b.mat("lm_head.weight", V, d)
	}
	if cfg.AttnResBlockSize > 0 {
		m.OutputAttnResProj = b.vec("model.output_attn_res_proj.weight", 1, d)
		m.OutputAttnResNorm = b.vec("model.output_attn_res_norm.weight", d)
	}
	if !cfg.Layout.Kimi() {
		b.family(m)
		return
	}
	for i := 0; i < cfg.NumHiddenLayers && b.err == nil; i++ {
		m.Layers = append(m.Layers, b.layer(cfg, i))
	}
}

// ignorable reports tensors the text model does not bind: the vision tower
// and projector (checked by vision.Load when the config has a
// vision_config, ignored for text-only use otherwise).
func ignorable(name string) bool { return vision.IsVisionTensor(name) }

// binder binds checkpoint tensors to model fields. With a nil checkpoint
// it only records the expected names and shapes (see Spec).
type binder struct {
	ck     *safetensors.Checkpoint
	prefix string
	used   map[string]bool
	err    error
	spec   []TensorSpec
	q8     bool // int8 weights with per-row scales are allowed
	// deferred binds matrices without their data (LoadDeferred)
	deferred bool
}

// TensorSpec is one tensor a configuration expects.
type TensorSpec struct {
	Name  string // without the layout prefix
	Shape []int
}

// Spec lists every tensor a checkpoint of cfg must hold, in binding order,
// with names as in the kimi_linear layout (kimi_k3 prefixes them with
// "language_model.").
func Spec(cfg *config.Config) []TensorSpec {
	b := &binder{used: map[string]bool{}}
	m := &Model{Cfg: cfg}
	b.model(m)
	return b.spec
}

// ShapeError reports a tensor whose shape differs from what the config
// implies.
type ShapeError struct {
	Tensor          string
	Expected, Found []int
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("tensor %s: expected shape %v, found %v", e.Tensor, e.Expected, e.Found)
}

func (b *binder) lookup(name string, shape ...int) *safetensors.Tensor {
	if b.err != nil {
		return nil
	}
	if b.ck == nil {
		b.spec = append(b.spec, TensorSpec{Name: name, Shape: shape})
		return nil
	}
	full := b.prefix + name
	t, ok := b.ck.Tensor(full)
	if !ok {
		b.err = fmt.Errorf("tensor %s: missing from checkpoint (expected shape %v)", full, shape)
		return nil
	}
	b.used[full] = true
	if !slices.Equal(t.Shape, shape) {
		b.err = &ShapeError{Tensor: full, Expected: shape, Found: t.Shape}
		return nil
	}
	switch t.DType {
	case "F32", "F16", "BF16":
	case "I8":
		if !b.q8 {
			b.err = fmt.Errorf("tensor %s: dtype I8 needs a quantization_config (compressed-tensors int8) in config.json", full)
			return nil
		}
	default:
		if _, ok := blockDType(t.DType); ok {
			return t // raw ggml blocks (a GGUF checkpoint); vectors refuse them in vec
		}
		b.err = fmt.Errorf("tensor %s: dtype %s is not supported (want F32, F16, BF16, or I8 with quantization_config)", full, t.DType)
		return nil
	}
	return t
}

// blockFormats are the ggml block dtypes a checkpoint tensor may have.
var blockFormats = []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.Q4K, tensor.Q5K, tensor.Q6K, tensor.MXFP4}

// blockDType maps a checkpoint dtype spelled as tensor.DType.String()
// ("Q4_K") to its block dtype.
func blockDType(d safetensors.DType) (tensor.DType, bool) {
	for _, b := range blockFormats {
		if string(d) == b.String() {
			return b, true
		}
	}
	return 0, false
}

func (b *binder) optional(name string) { b.used[b.prefix+name] = true }

// mat binds a [rows, cols] matrix.
func (b *binder) mat(name string, rows, cols int) *tensor.Mat {
	t := b.lookup(name, rows, cols)
	if t == nil {
		return nil
	}
	var scale []float32
	if t.DType == "I8" {
		// compressed-tensors: NAME.weight (int8) + NAME.weight_scale [rows, 1].
		if scale = b.vecAny(name+"_scale", rows); b.err != nil {
			return nil
		}
	}
	ck, full := b.ck, b.prefix+name
	fetch := func() (*tensor.Mat, error) {
		raw, err := ck.Bytes(full)
		if err != nil {
			return nil, err
		}
		if bt, ok := blockDType(t.DType); ok {
			m, err := tensor.NewBlocked(rows, cols, bt, raw)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", full, err)
			}
			return m, nil
		}
		switch t.DType {
		case "F32":
			return tensor.NewF32(rows, cols, asF32(raw)), nil
		case "I8":
			return tensor.NewQ8(rows, cols, unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)), scale), nil
		case "F16":
			return tensor.NewHalf(rows, cols, tensor.F16, asU16(raw)), nil
		default:
			return tensor.NewHalf(rows, cols, tensor.BF16, asU16(raw)), nil
		}
	}
	if b.deferred {
		dt := map[safetensors.DType]tensor.DType{"F32": tensor.F32, "I8": tensor.Q8, "F16": tensor.F16}[t.DType]
		if t.DType == "BF16" {
			dt = tensor.BF16
		}
		if bt, ok := blockDType(t.DType); ok {
			dt = bt
		}
		return &tensor.Mat{Rows: rows, Cols: cols, DType: dt, Fetch: fetch}
	}
	m, err := fetch()
	if err != nil {
		b.err = err
		return nil
	}
	return m
}

// vec binds a small tensor of the given shape as float32 (a copy).
func (b *binder) vec(name string, shape ...int) []float32 {
	if b.lookup(name, shape...) == nil {
		return nil
	}
	v, err := b.ck.Float32(b.prefix + name)
	if err != nil {
		b.err = err
	}
	return v
}

// vecAny binds a tensor with n elements whatever its shape; the spec (what
// init-random writes) lists it as [allowed[0]].
func (b *binder) vecAny(name string, allowed ...int) []float32 {
	return b.vecAnyAs(name, []int{allowed[0]}, allowed...)
}

// vecAnyAs is vecAny with the shape the spec lists (A_log is stored as
// [H], [1,1,H,1] or per channel [H·dk] in different checkpoints).
func (b *binder) vecAnyAs(name string, specShape []int, allowed ...int) []float32 {
	if b.err != nil {
		return nil
	}
	if b.ck == nil {
		b.spec = append(b.spec, TensorSpec{Name: name, Shape: specShape})
		return nil
	}
	full := b.prefix + name
	t, ok := b.ck.Tensor(full)
	if !ok {
		b.err = fmt.Errorf("tensor %s: missing from checkpoint (expected %v elements)", full, allowed)
		return nil
	}
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	for _, a := range allowed {
		if n == a {
			return b.vec(name, t.Shape...)
		}
	}
	b.err = fmt.Errorf("tensor %s: expected %v elements, found shape %v", full, allowed, t.Shape)
	return nil
}

// asF32 views little-endian bytes as float32 without copying when aligned.
func asF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	out := make([]float32, len(b)/4)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	return out
}

// asU16 views little-endian bytes as uint16 without copying when aligned.
func asU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	}
	out := make([]uint16, len(b)/2)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	return out
}

// mla binds an MLA mixer's tensors under prefix a (architecture.md §2.1):
// q_proj or q_a_proj/q_a_layernorm/q_b_proj, kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj, the g_proj output gate when the config has
// one, o_proj.
func (b *binder) mla(a string, cfg *config.Config) *MLA {
	d, H, dn, dr, dv := cfg.HiddenSize, cfg.NumHeads, cfg.QKNopeHeadDim, cfg.QKRopeHeadDim, cfg.VHeadDim
	ml := &MLA{}
	if cfg.QLoraRank > 0 {
		ml.QAProj = b.mat(a+"q_a_proj.weight", cfg.QLoraRank, d)
		ml.QALayernorm = b.vec(a+"q_a_layernorm.weight", cfg.QLoraRank)
		ml.QBProj = b.mat(a+"q_b_proj.weight", H*(dn+dr), cfg.QLoraRank)
	} else {
		ml.QProj = b.mat(a+"q_proj.weight", H*(dn+dr), d)
	}
	ml.KVAProjWithMQA = b.mat(a+"kv_a_proj_with_mqa.weight", cfg.KVLoraRank+dr, d)
	ml.KVALayernorm = b.vec(a+"kv_a_layernorm.weight", cfg.KVLoraRank)
	ml.KVBProj = b.mat(a+"kv_b_proj.weight", H*(dn+dv), cfg.KVLoraRank)
	if cfg.MLAOutputGate {
		ml.GProj = b.mat(a+"g_proj.weight", H*dv, d)
	}
	ml.OProj = b.mat(a+"o_proj.weight", d, H*dv)
	return ml
}

// glu binds a GLU block's three matrices named prefix+{gate,up,down}+
// ".weight": gate and up [I, w], down [w, I].
func (b *binder) glu(prefix, gate, up, down string, I, w int) MLP {
	return MLP{GateProj: b.mat(prefix+gate+".weight", I, w), UpProj: b.mat(prefix+up+".weight", I, w),
		DownProj: b.mat(prefix+down+".weight", w, I)}
}

func (b *binder) layer(cfg *config.Config, i int) *Layer {
	p := fmt.Sprintf("model.layers.%d.", i)
	d := cfg.HiddenSize
	l := &Layer{Kind: cfg.Kinds[i]}
	l.InputLayernorm = b.vec(p+"input_layernorm.weight", d)
	l.PostAttentionLayernorm = b.vec(p+"post_attention_layernorm.weight", d)
	if cfg.AttnResBlockSize > 0 {
		l.SelfAttentionResProj = b.vec(p+"self_attention_res_proj.weight", 1, d)
		l.SelfAttentionResNorm = b.vec(p+"self_attention_res_norm.weight", d)
		l.MLPResProj = b.vec(p+"mlp_res_proj.weight", 1, d)
		l.MLPResNorm = b.vec(p+"mlp_res_norm.weight", d)
	}
	a := p + "self_attn."
	if l.Kind == config.KDA {
		H, dk, K := cfg.KDAHeads, cfg.KDAHeadDim, cfg.ConvKernel
		hd := H * dk
		k := &KDA{
			QProj:   b.mat(a+"q_proj.weight", hd, d),
			KProj:   b.mat(a+"k_proj.weight", hd, d),
			VProj:   b.mat(a+"v_proj.weight", hd, d),
			QConv1d: b.vec(a+"q_conv1d.weight", hd, 1, K),
			KConv1d: b.vec(a+"k_conv1d.weight", hd, 1, K),
			VConv1d: b.vec(a+"v_conv1d.weight", hd, 1, K),
			FAProj:  b.mat(a+"f_a_proj.weight", dk, d),
			FBProj:  b.mat(a+"f_b_proj.weight", hd, dk),
			DtBias:  b.vecAny(a+"dt_bias", hd),
			// Written [1,1,H,1] as the Kimi-Linear checkpoints and vLLM's
			// kimi_linear loader (which slices dimension 2) have it.
			ALog:  b.vecAnyAs(a+"A_log", []int{1, 1, H, 1}, H, hd),
			BProj: b.mat(a+"b_proj.weight", H, d),
			ONorm: b.vec(a+"o_norm.weight", dk),
			OProj: b.mat(a+"o_proj.weight", d, hd),
		}
		if cfg.FullRankGate {
			k.GProj = b.mat(a+"g_proj.weight", hd, d)
		} else {
			k.GAProj = b.mat(a+"g_a_proj.weight", dk, d)
			k.GBProj = b.mat(a+"g_b_proj.weight", hd, dk)
		}
		l.KDA = k
	} else {
		l.MLA = b.mla(a, cfg)
	}
	if !cfg.IsMoE(i) {
		f := p + "mlp."
		I := cfg.IntermediateSize
		l.MLP = &MLP{
			GateProj: b.mat(f+"gate_proj.weight", I, d),
			UpProj:   b.mat(f+"up_proj.weight", I, d),
			DownProj: b.mat(f+"down_proj.weight", d, I),
		}
		return l
	}
	f := p + "block_sparse_moe."
	E, I, w := cfg.NumExperts, cfg.MoEIntermediateSize, cfg.ExpertWidth()
	moe := &MoE{
		Gate:                 b.mat(f+"gate.weight", E, d),
		EScoreCorrectionBias: b.vec(f+"gate.e_score_correction_bias", E),
		Experts:              make([]MLP, E),
	}
	for e := 0; e < E; e++ {
		x := fmt.Sprintf("%sexperts.%d.", f, e)
		moe.Experts[e] = MLP{
			GateProj: b.mat(x+"w1.weight", I, w),
			UpProj:   b.mat(x+"w3.weight", I, w),
			DownProj: b.mat(x+"w2.weight", w, I),
		}
	}
	if cfg.NumSharedExperts > 0 {
		S := cfg.NumSharedExperts * I
		moe.SharedExperts = &MLP{
			GateProj: b.mat(f+"shared_experts.gate_proj.weight", S, d),
			UpProj:   b.mat(f+"shared_experts.up_proj.weight", S, d),
			DownProj: b.mat(f+"shared_experts.down_proj.weight", d, S),
		}
	}
	if cfg.RoutedExpertHiddenSize > 0 {
		moe.RoutedExpertDownProj = b.mat(f+"routed_expert_down_proj.weight", w, d)
		moe.RoutedExpertUpProj = b.mat(f+"routed_expert_up_proj.weight", d, w)
		if cfg.LatentMoEUseNorm {
			moe.RoutedExpertNorm = b.vec(f+"routed_expert_norm.weight", w)
		}
	}
	l.MoE = moe
	return l
}
