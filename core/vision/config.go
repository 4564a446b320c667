package vision

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/imageio"
)

// PosEmb selects how patches learn where they are.
type PosEmb uint8

const (
	// PosDividedFixed ("divided_fixed", Kimi K3 / MoonViT): a learnable
	// absolute grid [init_pos_emb_height, init_pos_emb_width, D] bilinearly
	// resampled to the image's patch grid and added after the patch
	// embedding, plus 2D RoPE in every attention (for still images the
	// fixed temporal sin/cos term is zero: one frame).
	PosDividedFixed PosEmb = iota
	// PosRoPE2D ("rope_2d", tessera extension): 2D RoPE only, no absolute
	// table. tessera's tiny presets use it (architecture.md §6.3).
	PosRoPE2D
)

func (p PosEmb) String() string {
	if p == PosRoPE2D {
		return "rope_2d"
	}
	return "divided_fixed"
}

// Projector selects the mm_projector variant.
type Projector uint8

const (
	// ProjPatchMergerV2 ("patchmergerv2", K3): concat 2×2 → proj.0 → act →
	// proj.2 → RMSNorm (post_norm, eps projector_ln_eps).
	ProjPatchMergerV2 Projector = iota
	// ProjPatchMerger ("patchmerger", Qwen2-VL / Kimi-VL style): LayerNorm
	// (pre_norm, eps projector_ln_eps) on each patch → concat 2×2 → proj.0
	// → act → proj.2.
	ProjPatchMerger
)

func (p Projector) String() string {
	if p == ProjPatchMerger {
		return "patchmerger"
	}
	return "patchmergerv2"
}

// Act is an activation function.
type Act uint8

const (
	// ActGELUTanh is "gelu_pytorch_tanh".
	ActGELUTanh Act = iota
	// ActGELUErf is "gelu" (exact, erf form).
	ActGELUErf
)

func (a Act) String() string {
	if a == ActGELUErf {
		return "gelu"
	}
	return "gelu_pytorch_tanh"
}

func parseAct(field, s string) (Act, error) {
	switch s {
	case "gelu_pytorch_tanh", "gelu_new", "gelu_fast":
		return ActGELUTanh, nil
	case "gelu":
		return ActGELUErf, nil
	}
	return 0, fieldErr(field, "activation %q is not supported (want gelu_pytorch_tanh or gelu)", s)
}

// Config is a validated vision_config (Kimi K3 field names; see the
// package doc for the full list and defaults).
type Config struct {
	PatchSize      int
	Hidden         int // vt_hidden_size (D)
	Layers         int // vt_num_hidden_layers
	Heads          int // vt_num_attention_heads
	QKVHidden      int // qkv_hidden_size (H·hd), default D
	Intermediate   int // vt_intermediate_size
	MergeH, MergeW int // merge_kernel_size
	TextHidden     int // text_hidden_size = the LM's hidden_size

	RMSNorm   bool    // norm_type "rmsnorm" (else "layernorm")
	NormEps   float32 // vt_norm_eps (tessera); default 1e-5 layernorm, 2⁻²³ rmsnorm
	Act       Act     // activation_func
	AttnBias  bool    // attn_bias: wqkv/wo biases
	LinBias   bool    // linear_bias: mlp fc0/fc1 and projector biases
	PatchBias bool    // patch_embed_proj_bias

	PosEmb           PosEmb
	PosEmbH, PosEmbW int     // init_pos_emb_height/width (PosDividedFixed)
	RopeTheta        float32 // rope_theta (tessera), default 10000

	Projector Projector
	ProjAct   Act     // projector_hidden_act
	ProjEps   float32 // projector_ln_eps

	// Preprocessing (tessera extension fields in vision_config; Hugging
	// Face keeps them in preprocessor_config.json).
	MinPixels, MaxPixels int
	Mean, Std            [3]float32
	Resample             imageio.Resample
}

// HeadDim is qkv_hidden_size / vt_num_attention_heads.
func (c *Config) HeadDim() int { return c.QKVHidden / c.Heads }

// MergedDim is the projector's input width D·mh·mw.
func (c *Config) MergedDim() int { return c.Hidden * c.MergeH * c.MergeW }

// Preprocess returns the imageio options of the config.
func (c *Config) Preprocess() imageio.Options {
	return imageio.Options{PatchSize: c.PatchSize, MergeH: c.MergeH, MergeW: c.MergeW,
		MinPixels: c.MinPixels, MaxPixels: c.MaxPixels, Mean: c.Mean, Std: c.Std, Resample: c.Resample}
}

// TokensPerImage is the number of placeholder tokens an h×w image (after
// EXIF orientation) expands to: (ĥ/p/mh)·(ŵ/p/mw) with (ĥ, ŵ) from
// imageio.SmartResize.
func (c *Config) TokensPerImage(h, w int) (int, error) {
	gh, gw, err := c.Preprocess().Grid(h, w)
	if err != nil {
		return 0, err
	}
	return (gh / c.MergeH) * (gw / c.MergeW), nil
}

// FieldError names the vision_config field that is wrong.
type FieldError struct {
	Field string
	Msg   string
}

func (e *FieldError) Error() string { return fmt.Sprintf("vision_config field %s: %s", e.Field, e.Msg) }

func fieldErr(field, format string, args ...any) error {
	return &FieldError{Field: field, Msg: fmt.Sprintf(format, args...)}
}

// ParseModelConfig reads the vision_config of a kimi_k3 config.json. It
// returns (nil, nil) when the file has no vision_config. text_hidden_size
// defaults to text_config.hidden_size and must equal it when both are set.
func ParseModelConfig(configJSON []byte) (*Config, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(configJSON, &top); err != nil {
		return nil, fmt.Errorf("config.json is not a JSON object: %w", err)
	}
	vc, ok := top["vision_config"]
	if !ok || string(vc) == "null" {
		return nil, nil
	}
	textHidden := 0
	if tc, ok := top["text_config"]; ok {
		var t struct {
			Hidden int `json:"hidden_size"`
		}
		if err := json.Unmarshal(tc, &t); err != nil {
			return nil, fmt.Errorf("config field text_config.hidden_size: %w", err)
		}
		textHidden = t.Hidden
	}
	return ParseConfig(vc, textHidden)
}

// ParseConfig parses and validates a vision_config object. textHidden is
// the LM's hidden size (0: take text_hidden_size from the object).
func ParseConfig(data []byte, textHidden int) (*Config, error) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, fmt.Errorf("vision_config is not a JSON object: %v", err)
	}
	r := &reader{m: m}
	c := &Config{
		PatchSize:    r.int("patch_size", 14),
		Hidden:       r.int("vt_hidden_size", -1),
		Layers:       r.int("vt_num_hidden_layers", -1),
		Heads:        r.int("vt_num_attention_heads", -1),
		Intermediate: r.int("vt_intermediate_size", -1),
		AttnBias:     r.bool("attn_bias", false),
		LinBias:      r.bool("linear_bias", false),
		PatchBias:    r.bool("patch_embed_proj_bias", false),
		PosEmbH:      r.int("init_pos_emb_height", 64),
		PosEmbW:      r.int("init_pos_emb_width", 64),
		RopeTheta:    r.float("rope_theta", 10000),
		ProjEps:      r.float("projector_ln_eps", 1e-5),
		MinPixels:    r.int("min_pixels", 56*56),
		MaxPixels:    r.int("max_pixels", 28*28*1280),
		Mean:         r.triple("image_mean", [3]float32{0.5, 0.5, 0.5}),
		Std:          r.triple("image_std", [3]float32{0.5, 0.5, 0.5}),
	}
	c.QKVHidden = r.int("qkv_hidden_size", c.Hidden)
	c.MergeH, c.MergeW = r.pair("merge_kernel_size", 2, 2)
	c.TextHidden = r.int("text_hidden_size", textHidden)
	if r.err != nil {
		return nil, r.err
	}
	var err error
	if c.Act, err = parseAct("activation_func", r.str("activation_func", "gelu_pytorch_tanh")); err != nil {
		return nil, err
	}
	if c.ProjAct, err = parseAct("projector_hidden_act", r.str("projector_hidden_act", "gelu")); err != nil {
		return nil, err
	}
	switch s := r.str("norm_type", "rmsnorm"); s {
	case "rmsnorm":
		c.RMSNorm = true
		c.NormEps = r.float("vt_norm_eps", float32(math.Nextafter32(1, 2)-1))
	case "layernorm":
		c.NormEps = r.float("vt_norm_eps", 1e-5)
	default:
		return nil, fieldErr("norm_type", "%q is not supported (want rmsnorm or layernorm)", s)
	}
	switch s := r.str("pos_emb_type", "divided_fixed"); s {
	case "divided_fixed":
		c.PosEmb = PosDividedFixed
	case "rope_2d":
		c.PosEmb = PosRoPE2D
	default:
		return nil, fieldErr("pos_emb_type", "%q is not supported (want divided_fixed or rope_2d)", s)
	}
	if s := r.str("pos_emb_interpolation_mode", "bilinear"); s != "bilinear" {
		return nil, fieldErr("pos_emb_interpolation_mode", "%q is not supported (want bilinear)", s)
	}
	switch s := r.str("mm_projector_type", "patchmergerv2"); s {
	case "patchmergerv2":
		c.Projector = ProjPatchMergerV2
	case "patchmerger":
		c.Projector = ProjPatchMerger
	default:
		return nil, fieldErr("mm_projector_type", "%q is not supported (want patchmergerv2 or patchmerger)", s)
	}
	if s := r.str("merge_type", "sd2_tpool"); s != "sd2_tpool" {
		return nil, fieldErr("merge_type", "%q is not supported (want sd2_tpool)", s)
	}
	if s := r.str("mlp_type", "mlp2"); s != "mlp2" {
		return nil, fieldErr("mlp_type", "%q is not supported (want mlp2)", s)
	}
	if c.Resample, err = imageio.ParseResample(r.str("resample", "bicubic")); err != nil {
		return nil, fieldErr("resample", "%v", err)
	}
	if n := r.int("num_channels", 3); n != 3 {
		return nil, fieldErr("num_channels", "%d is not supported (want 3)", n)
	}
	mm := r.int("mm_hidden_size", c.Hidden)
	if r.err != nil {
		return nil, r.err
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if mm != c.Hidden {
		return nil, fieldErr("mm_hidden_size", "%d must equal vt_hidden_size %d", mm, c.Hidden)
	}
	if textHidden > 0 && c.TextHidden != textHidden {
		return nil, fieldErr("text_hidden_size", "%d differs from the text model's hidden_size %d", c.TextHidden, textHidden)
	}
	return c, nil
}

// Validate checks sizes and their relations, naming the field at fault.
func (c *Config) Validate() error {
	pos := []struct {
		name string
		v    int
	}{
		{"patch_size", c.PatchSize}, {"vt_hidden_size", c.Hidden}, {"vt_num_hidden_layers", c.Layers},
		{"vt_num_attention_heads", c.Heads}, {"qkv_hidden_size", c.QKVHidden},
		{"vt_intermediate_size", c.Intermediate}, {"merge_kernel_size", c.MergeH},
		{"merge_kernel_size", c.MergeW}, {"text_hidden_size", c.TextHidden},
		{"max_pixels", c.MaxPixels},
	}
	for _, p := range pos {
		if p.v <= 0 {
			if p.v == -1 {
				return fieldErr(p.name, "missing (required)")
			}
			return fieldErr(p.name, "%d must be positive", p.v)
		}
	}
	if c.QKVHidden%c.Heads != 0 {
		return fieldErr("qkv_hidden_size", "%d is not divisible by vt_num_attention_heads %d", c.QKVHidden, c.Heads)
	}
	if c.HeadDim()%4 != 0 {
		return fieldErr("qkv_hidden_size", "head dim %d (qkv_hidden_size/vt_num_attention_heads) must be a multiple of 4 for 2D RoPE", c.HeadDim())
	}
	if c.PosEmb == PosDividedFixed && (c.PosEmbH <= 0 || c.PosEmbW <= 0) {
		return fieldErr("init_pos_emb_height", "grid %dx%d must be positive for divided_fixed", c.PosEmbH, c.PosEmbW)
	}
	if !(c.RopeTheta > 0) {
		return fieldErr("rope_theta", "%v must be positive", c.RopeTheta)
	}
	if !(c.NormEps > 0) {
		return fieldErr("vt_norm_eps", "%v must be positive", c.NormEps)
	}
	if !(c.ProjEps > 0) {
		return fieldErr("projector_ln_eps", "%v must be positive", c.ProjEps)
	}
	if c.MinPixels < 0 || c.MinPixels > c.MaxPixels {
		return fieldErr("min_pixels", "%d must lie in [0, max_pixels %d]", c.MinPixels, c.MaxPixels)
	}
	f := c.PatchSize * max(c.MergeH, c.MergeW)
	if c.MaxPixels < f*f {
		return fieldErr("max_pixels", "%d cannot hold one %dx%d tile (patch_size·merge)", c.MaxPixels, f, f)
	}
	for i := range 3 {
		if !(c.Std[i] > 0) {
			return fieldErr("image_std", "component %d = %v must be positive", i, c.Std[i])
		}
	}
	return nil
}

// reader reads typed fields, recording the first error.
type reader struct {
	m   map[string]any
	err error
}

func (r *reader) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = fieldErr(field, format, args...)
	}
}

func (r *reader) int(k string, def int) int {
	v, ok := r.m[k]
	if !ok || v == nil {
		return def
	}
	n, isNum := v.(json.Number)
	if !isNum {
		r.fail(k, "%v is not an integer", v)
		return def
	}
	i, err := n.Int64()
	if err != nil || i < math.MinInt32 || i > math.MaxInt32 {
		r.fail(k, "%v is not an integer in range", n)
		return def
	}
	return int(i)
}

func (r *reader) float(k string, def float32) float32 {
	v, ok := r.m[k]
	if !ok || v == nil {
		return def
	}
	n, isNum := v.(json.Number)
	if !isNum {
		r.fail(k, "%v is not a number", v)
		return def
	}
	f, err := n.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		r.fail(k, "%v is not a finite number", n)
		return def
	}
	return float32(f)
}

func (r *reader) bool(k string, def bool) bool {
	v, ok := r.m[k]
	if !ok || v == nil {
		return def
	}
	b, isBool := v.(bool)
	if !isBool {
		r.fail(k, "%v is not a boolean", v)
		return def
	}
	return b
}

func (r *reader) str(k, def string) string {
	v, ok := r.m[k]
	if !ok || v == nil {
		return def
	}
	s, isStr := v.(string)
	if !isStr {
		r.fail(k, "%v is not a string", v)
		return def
	}
	return s
}

// pair reads an int or a 2-element int list.
func (r *reader) pair(k string, d0, d1 int) (int, int) {
	v, ok := r.m[k]
	if !ok || v == nil {
		return d0, d1
	}
	if _, isNum := v.(json.Number); isNum {
		n := r.int(k, d0)
		return n, n
	}
	l, isList := v.([]any)
	if !isList || len(l) != 2 {
		r.fail(k, "%v is not an integer or a list of 2 integers", v)
		return d0, d1
	}
	sub := &reader{m: map[string]any{k: l[0]}}
	a := sub.int(k, d0)
	sub.m[k] = l[1]
	b := sub.int(k, d1)
	if sub.err != nil {
		r.fail(k, "%v is not a list of 2 integers", v)
	}
	return a, b
}

// triple reads a list of 3 numbers.
func (r *reader) triple(k string, def [3]float32) [3]float32 {
	v, ok := r.m[k]
	if !ok || v == nil {
		return def
	}
	l, isList := v.([]any)
	if !isList || len(l) != 3 {
		r.fail(k, "%v is not a list of 3 numbers", v)
		return def
	}
	var out [3]float32
	for i, e := range l {
		sub := &reader{m: map[string]any{k: e}}
		out[i] = sub.float(k, def[i])
		if sub.err != nil {
			r.fail(k, "element %d (%v) is not a finite number", i, e)
		}
	}
	return out
}
