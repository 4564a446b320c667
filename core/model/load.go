package model

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/bind"
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
)

// Load binds the tensors of ck to a model of configuration cfg. Every
// expected tensor must be present with its exact shape; a tensor the model
// does not use is an error, except vision tensors in a checkpoint whose
// config has no vision_config (text-only use). With a vision_config the
// vision tower's tensors are checked from the checkpoint's header
// (vision.Check) and read on the first image (Model.VisionTower), so ck
// must stay open while the model is used. F32 tensors of a memory-mapped
// checkpoint are used in place; F16/BF16 matrices stay half precision.
func Load(cfg *config.Config, ck *safetensors.Checkpoint) (*Model, error) {
	return load(cfg, ck, false)
}

// LoadDeferred is Load with every weight matrix deferred (tensor.Mat.Fetch):
// shapes and dtypes are checked as by Load, vectors are loaded (the vision
// tower, as by Load, on the first image), but matrix data stays in the checkpoint until something
// resolves it. A GPU runner built from the model then uploads one matrix at
// a time, so memory never holds the whole checkpoint (the browser reads it
// from JavaScript memory, outside the 4 GiB wasm heap). The embedding
// table stays loaded when the model has a vision tower (image features are
// fused into text embeddings on the host). The CPU runner refuses a
// deferred model: ck must stay open while the model is used.
func LoadDeferred(cfg *config.Config, ck *safetensors.Checkpoint) (*Model, error) {
	return load(cfg, ck, true)
}

// HeapLimit, when positive, is the most memory a model loaded into memory
// (not deferred) may take: Load then checks the checkpoint's header first
// (CheckHeader) and refuses, before reading any tensor, a model whose
// weights, KDA state and MLA cache for HeapContext tokens (Needs.Memory)
// are more. The browser sets it to its 4 GiB WebAssembly heap less room
// for the runtime, so a model too large for it is refused before its
// download rather than failing once the heap is full.
var HeapLimit int64

// HeapContext is the context HeapLimit's check budgets the MLA cache for.
const HeapContext = 4096

func load(cfg *config.Config, ck *safetensors.Checkpoint, deferred bool) (*Model, error) {
	if HeapLimit > 0 && !deferred {
		n, err := CheckHeader(cfg, ck)
		if err != nil {
			return nil, err
		}
		if need := n.Memory(HeapContext); need > HeapLimit {
			return nil, fmt.Errorf("the model needs %.2f GiB of memory on the CPU (weights %.2f GiB, state and cache for %d tokens %.2f GiB), more than the %.2f GiB this WebAssembly heap can hold: "+
				"use a smaller or quantized file (Q8_0, Q4_K) or a GPU backend, which keeps the weights outside the heap",
				gib(need), gib(n.Weights), HeapContext, gib(need-n.Weights), gib(HeapLimit))
		}
	}
	b := newBinder(cfg, ck)
	b.Deferred = deferred
	m := &Model{Cfg: cfg, Deferred: deferred}
	b.model(m)
	if b.Err != nil {
		return nil, b.Err
	}
	vc, err := b.finish(cfg)
	if err != nil {
		return nil, err
	}
	if vc != nil {
		m.VisionCfg, m.tower = vc, &lazyTower{cfg: vc, ck: ck}
	}
	return m, nil
}

// newBinder is the text model's binder over ck: int8 and MXFP4 matrices
// allowed where cfg's quantization_config says, names under
// "language_model." in the kimi_k3 layout.
func newBinder(cfg *config.Config, ck *safetensors.Checkpoint) *binder {
	b := &binder{bind.New(ck)}
	b.Q8 = cfg.Quant == "q8"
	if cfg.Quant == "mxfp4" {
		b.MXFP4 = cfg.QuantTargets
	}
	if cfg.Layout == config.LayoutKimiK3 {
		b.Prefix = "language_model."
	}
	return b
}

// finish ends a bind of the text model: it checks the vision tower's
// tensors from the header when cfg has a vision_config (vision.Check; the
// tower binds on its first image) and returns its configuration, and
// refuses a checkpoint with tensors the model does not use.
func (b *binder) finish(cfg *config.Config) (*vision.Config, error) {
	var vc *vision.Config
	if cfg.Vision != nil {
		var err error
		if vc, err = vision.ParseConfig(cfg.Vision, cfg.HiddenSize); err != nil {
			return nil, err
		}
		if err := vision.Check(vc, b.CK); err != nil {
			return nil, err
		}
	}
	var extra []string
	for _, n := range b.CK.Names() {
		if b.Used[n] || ignorable(n) || familyIgnorable(cfg, n) {
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
	return vc, nil
}

// model binds the model-level tensors and every layer.
func (b *binder) model(m *Model) {
	cfg := m.Cfg
	d, V := cfg.HiddenSize, cfg.VocabSize
	keep := b.Deferred
	b.Deferred = b.Deferred && cfg.Vision == nil // image fusion reads the table on the host
	m.EmbedTokens = b.Mat("model.embed_tokens.weight", V, d)
	b.Deferred = keep
	if cfg.TieWordEmbed {
		m.LMHead = m.EmbedTokens
		b.Optional("lm_head.weight")
	} else {
		m.LMHead = b.Mat("lm_head.weight", V, d)
	}
	// the final norm (and AttnRes read-out) after the Kimi layers: a file
	// in name order (safetensors) holds them last, and a source read as
	// it downloads then binds the layers before waiting for its end. The
	// other families bind theirs first (Qwen3-Next's layers adjust it).
	final := func() {
		m.Norm = b.Vec("model.norm.weight", d)
		if cfg.AttnResBlockSize > 0 {
			m.OutputAttnResProj = b.Vec("model.output_attn_res_proj.weight", 1, d)
			m.OutputAttnResNorm = b.Vec("model.output_attn_res_norm.weight", d)
		}
	}
	if !cfg.Layout.Kimi() {
		final()
		b.family(m)
		return
	}
	m.Layers = make([]*Layer, cfg.NumHiddenLayers)
	for _, i := range b.layerOrder(cfg.NumHiddenLayers) {
		if b.Err != nil {
			break
		}
		m.Layers[i] = b.layer(cfg, i)
	}
	final()
}

// layerOrder is the order to bind n layers in: the order their tensors
// lie in the checkpoint's safetensors files. Writers keep tensors in name
// order (model.layers.10 before model.layers.2), and a source read as it
// downloads (the browser's) then binds what has arrived instead of
// waiting for a part far ahead while the layers before it sit ready.
// Layers are in index order where nothing says otherwise: a spec (no
// checkpoint), or one assembled from another format (a GGUF keeps them in
// index order already).
func (b *binder) layerOrder(n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = i
	}
	if b.CK == nil || len(b.CK.Files()) == 0 {
		return order
	}
	file := map[string]int{} // shard name → its place (Files is sorted by name)
	for i, f := range b.CK.Files() {
		file[f.Name] = i
	}
	type at struct{ file, off int64 }
	byPlace := func(x, y at) int { return cmp.Or(cmp.Compare(x.file, y.file), cmp.Compare(x.off, y.off)) }
	first := make([]at, n) // each layer's first byte; absent layers last, in index order
	for i := range first {
		first[i] = at{math.MaxInt64, 0}
	}
	prefix := b.Prefix + "model.layers."
	for _, name := range b.CK.Names() {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		num, _, ok := strings.Cut(rest, ".")
		i, err := strconv.Atoi(num)
		if !ok || err != nil || i < 0 || i >= n {
			continue // not a layer's tensor: the unused-tensor check reports it
		}
		t, _ := b.CK.Tensor(name)
		if a := (at{int64(file[t.Shard]), t.Offset}); byPlace(a, first[i]) < 0 {
			first[i] = a
		}
	}
	slices.SortStableFunc(order, func(x, y int) int { return byPlace(first[x], first[y]) })
	return order
}

// ignorable reports tensors the text model does not bind: the vision tower
// and projector (checked by vision.Check when the config has a
// vision_config, ignored for text-only use otherwise).
func ignorable(name string) bool { return vision.IsVisionTensor(name) }

// binder binds the text model's checkpoint tensors to its fields
// (bind.Binder, shared with the vision tower). With a nil checkpoint it
// only records the expected names and shapes (see Spec).
type binder struct{ *bind.Binder }

// TensorSpec is one tensor a configuration expects.
type TensorSpec = bind.TensorSpec

// ShapeError reports a tensor whose shape differs from what the config
// implies.
type ShapeError = bind.ShapeError

// Spec lists every tensor a checkpoint of cfg must hold, in binding order,
// with names as in the kimi_linear layout (kimi_k3 prefixes them with
// "language_model.").
func Spec(cfg *config.Config) []TensorSpec {
	b := &binder{bind.New(nil)}
	m := &Model{Cfg: cfg}
	b.model(m)
	return b.Spec
}

// mla binds an MLA mixer's tensors under prefix a (architecture.md §2.1):
// q_proj or q_a_proj/q_a_layernorm/q_b_proj, kv_a_proj_with_mqa,
// kv_a_layernorm, kv_b_proj, the g_proj output gate when the config has
// one, o_proj.
func (b *binder) mla(a string, cfg *config.Config) *MLA {
	d, H, dn, dr, dv := cfg.HiddenSize, cfg.NumHeads, cfg.QKNopeHeadDim, cfg.QKRopeHeadDim, cfg.VHeadDim
	ml := &MLA{}
	if cfg.QLoraRank > 0 {
		ml.QAProj = b.Mat(a+"q_a_proj.weight", cfg.QLoraRank, d)
		ml.QALayernorm = b.Vec(a+"q_a_layernorm.weight", cfg.QLoraRank)
		ml.QBProj = b.Mat(a+"q_b_proj.weight", H*(dn+dr), cfg.QLoraRank)
	} else {
		ml.QProj = b.Mat(a+"q_proj.weight", H*(dn+dr), d)
	}
	ml.KVAProjWithMQA = b.Mat(a+"kv_a_proj_with_mqa.weight", cfg.KVLoraRank+dr, d)
	ml.KVALayernorm = b.Vec(a+"kv_a_layernorm.weight", cfg.KVLoraRank)
	ml.KVBProj = b.Mat(a+"kv_b_proj.weight", H*(dn+dv), cfg.KVLoraRank)
	if cfg.MLAOutputGate {
		ml.GProj = b.Mat(a+"g_proj.weight", H*dv, d)
	}
	ml.OProj = b.Mat(a+"o_proj.weight", d, H*dv)
	return ml
}

// glu binds a GLU block's three matrices named prefix+{gate,up,down}+
// ".weight": gate and up [I, w], down [w, I].
func (b *binder) glu(prefix, gate, up, down string, I, w int) MLP {
	return MLP{GateProj: b.Mat(prefix+gate+".weight", I, w), UpProj: b.Mat(prefix+up+".weight", I, w),
		DownProj: b.Mat(prefix+down+".weight", w, I)}
}

func (b *binder) layer(cfg *config.Config, i int) *Layer {
	p := fmt.Sprintf("model.layers.%d.", i)
	d := cfg.HiddenSize
	l := &Layer{Kind: cfg.Kinds[i]}
	l.InputLayernorm = b.Vec(p+"input_layernorm.weight", d)
	l.PostAttentionLayernorm = b.Vec(p+"post_attention_layernorm.weight", d)
	if cfg.AttnResBlockSize > 0 {
		l.SelfAttentionResProj = b.Vec(p+"self_attention_res_proj.weight", 1, d)
		l.SelfAttentionResNorm = b.Vec(p+"self_attention_res_norm.weight", d)
		l.MLPResProj = b.Vec(p+"mlp_res_proj.weight", 1, d)
		l.MLPResNorm = b.Vec(p+"mlp_res_norm.weight", d)
	}
	a := p + "self_attn."
	if l.Kind == config.KDA {
		H, dk, K := cfg.KDAHeads, cfg.KDAHeadDim, cfg.ConvKernel
		hd := H * dk
		k := &KDA{
			QProj:   b.Mat(a+"q_proj.weight", hd, d),
			KProj:   b.Mat(a+"k_proj.weight", hd, d),
			VProj:   b.Mat(a+"v_proj.weight", hd, d),
			QConv1d: b.Vec(a+"q_conv1d.weight", hd, 1, K),
			KConv1d: b.Vec(a+"k_conv1d.weight", hd, 1, K),
			VConv1d: b.Vec(a+"v_conv1d.weight", hd, 1, K),
			FAProj:  b.Mat(a+"f_a_proj.weight", dk, d),
			FBProj:  b.Mat(a+"f_b_proj.weight", hd, dk),
			DtBias:  b.VecAny(a+"dt_bias", hd),
			// Written [1,1,H,1] as the Kimi-Linear checkpoints and vLLM's
			// kimi_linear loader (which slices dimension 2) have it.
			ALog:  b.VecAnyAs(a+"A_log", []int{1, 1, H, 1}, H, hd),
			BProj: b.Mat(a+"b_proj.weight", H, d),
			ONorm: b.Vec(a+"o_norm.weight", dk),
			OProj: b.Mat(a+"o_proj.weight", d, hd),
		}
		if cfg.FullRankGate {
			k.GProj = b.Mat(a+"g_proj.weight", hd, d)
		} else {
			k.GAProj = b.Mat(a+"g_a_proj.weight", dk, d)
			k.GBProj = b.Mat(a+"g_b_proj.weight", hd, dk)
		}
		l.KDA = k
	} else {
		l.MLA = b.mla(a, cfg)
	}
	if !cfg.IsMoE(i) {
		f := p + "mlp."
		I := cfg.IntermediateSize
		l.MLP = &MLP{
			GateProj: b.Mat(f+"gate_proj.weight", I, d),
			UpProj:   b.Mat(f+"up_proj.weight", I, d),
			DownProj: b.Mat(f+"down_proj.weight", d, I),
		}
		return l
	}
	f := p + "block_sparse_moe."
	E, I, w := cfg.NumExperts, cfg.MoEIntermediateSize, cfg.ExpertWidth()
	moe := &MoE{
		Gate:                 b.Mat(f+"gate.weight", E, d),
		EScoreCorrectionBias: b.Vec(f+"gate.e_score_correction_bias", E),
		Experts:              make([]MLP, E),
	}
	for e := 0; e < E; e++ {
		x := fmt.Sprintf("%sexperts.%d.", f, e)
		moe.Experts[e] = MLP{
			GateProj: b.Mat(x+"w1.weight", I, w),
			UpProj:   b.Mat(x+"w3.weight", I, w),
			DownProj: b.Mat(x+"w2.weight", w, I),
		}
	}
	if cfg.NumSharedExperts > 0 {
		S := cfg.NumSharedExperts * I
		moe.SharedExperts = &MLP{
			GateProj: b.Mat(f+"shared_experts.gate_proj.weight", S, d),
			UpProj:   b.Mat(f+"shared_experts.up_proj.weight", S, d),
			DownProj: b.Mat(f+"shared_experts.down_proj.weight", d, S),
		}
	}
	if cfg.RoutedExpertHiddenSize > 0 {
		moe.RoutedExpertDownProj = b.Mat(f+"routed_expert_down_proj.weight", w, d)
		moe.RoutedExpertUpProj = b.Mat(f+"routed_expert_up_proj.weight", d, w)
		if cfg.LatentMoEUseNorm {
			moe.RoutedExpertNorm = b.Vec(f+"routed_expert_norm.weight", w)
		}
	}
	l.MoE = moe
	return l
}

func gib(n int64) float64 { return float64(n) / (1 << 30) }
