package vision

import (
	"fmt"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/core/bind"
	"github.com/tessera-llm/tessera/core/cpu"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Norm is a LayerNorm (W, B; B nil without bias) or an RMSNorm (W only,
// RMS true).
type Norm struct {
	W   []float32 `ckpt:"weight" shape:"n"`
	B   []float32 `ckpt:"bias" shape:"n" if:"!rms"`
	RMS bool
	Eps float32
}

// Block is one pre-norm ViT block:
//
//	x += wo(Attn(RoPE(q), RoPE(k), v)),  (q, k, v) = wqkv(norm0(x))
//	x += fc1(act(fc0(norm1(x))))
type Block struct {
	Norm0 Norm        `ckpt:"norm0" with:"n=D"`
	Norm1 Norm        `ckpt:"norm1" with:"n=D"`
	WQKV  *tensor.Mat `ckpt:"wqkv.weight" shape:"Q3,D"`
	BQKV  []float32   `ckpt:"wqkv.bias" shape:"Q3" if:"attn_bias"`
	WO    *tensor.Mat `ckpt:"wo.weight" shape:"D,Q"`
	BO    []float32   `ckpt:"wo.bias" shape:"D" if:"attn_bias"`
	FC0   *tensor.Mat `ckpt:"mlp.fc0.weight" shape:"I,D"`
	B0    []float32   `ckpt:"mlp.fc0.bias" shape:"I" if:"lin_bias"`
	FC1   *tensor.Mat `ckpt:"mlp.fc1.weight" shape:"D,I"`
	B1    []float32   `ckpt:"mlp.fc1.bias" shape:"D" if:"lin_bias"`
}

// Tower is the vision tower and projector bound to weights; the struct
// tags name each checkpoint tensor once (bind.Binder.Struct: Load binds
// them, Spec lists them).
type Tower struct {
	Cfg       *Config
	PatchW    *tensor.Mat `ckpt:"vision_tower.patch_embed.proj.weight" shape:"D,3,p,p"` // [D, 3·p·p]
	PatchB    []float32   `ckpt:"vision_tower.patch_embed.proj.bias" shape:"D" if:"patch_bias"`
	PosEmb    []float32   `ckpt:"vision_tower.patch_embed.pos_emb.weight" shape:"ph,pw,D" if:"pos_emb"` // nil for rope_2d
	Blocks    []Block     `ckpt:"vision_tower.encoder.blocks" n:"layers"`
	FinalNorm Norm        `ckpt:"vision_tower.encoder.final_layernorm" with:"n=D"`
	PreNorm   *Norm       `ckpt:"mm_projector.pre_norm" if:"merger" with:"n=D,rms=false"` // patchmerger: LayerNorm over D before the merge
	Proj0     *tensor.Mat `ckpt:"mm_projector.proj.0.weight" shape:"M,M"`
	ProjB0    []float32   `ckpt:"mm_projector.proj.0.bias" shape:"M" if:"lin_bias"`
	Proj2     *tensor.Mat `ckpt:"mm_projector.proj.2.weight" shape:"TH,M"`
	ProjB2    []float32   `ckpt:"mm_projector.proj.2.bias" shape:"TH" if:"lin_bias"`
	PostNorm  *Norm       `ckpt:"mm_projector.post_norm" if:"!merger" with:"n=TH,rms=true"` // patchmergerv2: RMSNorm over the text width
}

// TensorSpec is one tensor of the vision checkpoint.
type TensorSpec = bind.TensorSpec

// symbols are the dimensions and conditions the Tower's tags use.
func (c *Config) symbols() (map[string]int, map[string]bool) {
	return map[string]int{"D": c.Hidden, "p": c.PatchSize, "ph": c.PosEmbH, "pw": c.PosEmbW, "layers": c.Layers,
			"Q": c.QKVHidden, "Q3": 3 * c.QKVHidden, "I": c.Intermediate, "M": c.MergedDim(), "TH": c.TextHidden},
		map[string]bool{"rms": c.RMSNorm, "patch_bias": c.PatchBias, "pos_emb": c.PosEmb == PosDividedFixed,
			"attn_bias": c.AttnBias, "lin_bias": c.LinBias, "merger": c.Projector == ProjPatchMerger}
}

// Spec lists every tensor a checkpoint of c must hold (full names), from
// the Tower's tags.
func Spec(c *Config) []TensorSpec {
	b := bind.New(nil)
	dims, conds := c.symbols()
	b.Struct("", &Tower{}, dims, conds)
	return b.Spec
}

// IsVisionTensor reports whether a checkpoint tensor belongs to the vision
// tower or projector (the names Load binds).
func IsVisionTensor(name string) bool {
	return strings.HasPrefix(name, "vision_tower.") || strings.HasPrefix(name, "mm_projector.")
}

// Load binds the vision tensors of ck for config c (bind.Binder, as the
// text model: tensors of a memory-mapped checkpoint used in place). Every
// tensor of Spec must be present with its exact shape, and any other
// vision_tower.* / mm_projector.* tensor is an error (Check makes the same
// checks without reading). Matrices keep their half-precision storage (the
// patch embedding is widened to float32); vectors are float32.
func Load(c *Config, ck *safetensors.Checkpoint) (*Tower, error) {
	t, err := bindTower(c, ck, false)
	if err != nil {
		return nil, err
	}
	if t.PatchW.DType != tensor.F32 {
		t.PatchW = tensor.NewF32(t.PatchW.Rows, t.PatchW.Cols, t.PatchW.Float32())
	}
	for i := range t.Blocks {
		t.Blocks[i].Norm0.RMS, t.Blocks[i].Norm0.Eps = c.RMSNorm, c.NormEps
		t.Blocks[i].Norm1.RMS, t.Blocks[i].Norm1.Eps = c.RMSNorm, c.NormEps
	}
	t.FinalNorm.RMS, t.FinalNorm.Eps = c.RMSNorm, c.NormEps
	if t.PreNorm != nil {
		t.PreNorm.Eps = c.ProjEps
	}
	if t.PostNorm != nil {
		t.PostNorm.RMS, t.PostNorm.Eps = true, c.ProjEps
	}
	return t, nil
}

// Check makes every check Load makes — the config, each tensor of Spec
// present with its exact shape and a dtype Load takes, no other vision
// tensor — from the checkpoint's header alone (bind.Binder.HeaderOnly):
// it reads no tensor data, so a model checks its vision tower at load and
// reads it on the first image.
func Check(c *Config, ck *safetensors.Checkpoint) error {
	_, err := bindTower(c, ck, true)
	return err
}

// bindTower binds the Tower's tags from ck (headerOnly: checks them, the
// Tower's fields left nil) and refuses vision tensors c does not use.
func bindTower(c *Config, ck *safetensors.Checkpoint, headerOnly bool) (*Tower, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	b := bind.New(ck)
	b.HeaderOnly = headerOnly
	dims, conds := c.symbols()
	t := &Tower{Cfg: c}
	b.Struct("", t, dims, conds)
	if b.Err != nil {
		return nil, b.Err
	}
	var extra []string
	for _, n := range ck.Names() {
		if IsVisionTensor(n) && !b.Used[n] {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("checkpoint has vision tensors the vision_config does not use: %s", strings.Join(extra, ", "))
	}
	return t, nil
}

// Declare lists the tower's weights to u (a backend that uploads them).
func (t *Tower) Declare(u nn.Uploader) {
	norm := func(name string, n *Norm) {
		if n != nil {
			u.Vecs([]string{name + ".weight"}, n.W)
			u.Vecs([]string{name + ".bias"}, n.B)
		}
	}
	u.Mats([]string{"vision_tower.patch_embed.proj.weight"}, t.PatchW)
	u.Vecs([]string{"vision_tower.patch_embed.proj.bias"}, t.PatchB)
	for i := range t.Blocks {
		b := &t.Blocks[i]
		p := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
		norm(p+"norm0", &b.Norm0)
		norm(p+"norm1", &b.Norm1)
		for _, m := range []struct {
			n string
			w *tensor.Mat
			b []float32
		}{{"wqkv", b.WQKV, b.BQKV}, {"wo", b.WO, b.BO}, {"mlp.fc0", b.FC0, b.B0}, {"mlp.fc1", b.FC1, b.B1}} {
			u.Mats([]string{p + m.n + ".weight"}, m.w)
			u.Vecs([]string{p + m.n + ".bias"}, m.b)
		}
	}
	norm("vision_tower.encoder.final_layernorm", &t.FinalNorm)
	norm("mm_projector.pre_norm", t.PreNorm)
	norm("mm_projector.post_norm", t.PostNorm)
	u.Mats([]string{"mm_projector.proj.0.weight"}, t.Proj0)
	u.Vecs([]string{"mm_projector.proj.0.bias"}, t.ProjB0)
	u.Mats([]string{"mm_projector.proj.2.weight"}, t.Proj2)
	u.Vecs([]string{"mm_projector.proj.2.bias"}, t.ProjB2)
}

// Graph is the tower's forward pass bound to a backend, with scratch for
// images of up to MaxN patches.
type Graph struct {
	t    *Tower
	b    nn.VisionBackend
	MaxN int

	px, x, xn, qkv, att, o, hid nn.Tensor
	cos, sin, pos, mh, out      nn.Tensor
}

// Build allocates the forward pass's scratch on b for images of up to
// maxN patches.
func (t *Tower) Build(b nn.VisionBackend, maxN int) *Graph {
	c := t.Cfg
	D, Q, I, p := c.Hidden, c.QKVHidden, c.Intermediate, c.PatchSize
	maxM := max(1, maxN/(c.MergeH*c.MergeW))
	return &Graph{t: t, b: b, MaxN: maxN,
		px: b.Alloc(maxN, 3*p*p), x: b.Alloc(maxN, D), xn: b.Alloc(maxN, D), qkv: b.Alloc(maxN, 3*Q),
		att: b.Alloc(maxN, Q), o: b.Alloc(maxN, D), hid: b.Alloc(maxN, I),
		cos: b.Alloc(maxN, c.HeadDim()/2), sin: b.Alloc(maxN, c.HeadDim()/2), pos: b.Alloc(maxN, D),
		mh: b.Alloc(maxM, c.MergedDim()), out: b.Alloc(maxM, c.TextHidden)}
}

// Encode runs one image through the tower and projector on the CPU (pool
// p; nil: one thread) and returns its merged, projected tokens
// [Merged, text_hidden_size] (Graph.Encode).
func (t *Tower) Encode(p *ref.Pool, px *imageio.Patches) ([]float32, error) {
	if err := t.Cfg.CheckPatches(px); err != nil {
		return nil, err
	}
	return t.Build(cpu.New(p, cpu.Options{}), px.N()).Encode(px)
}

// norm applies n (LayerNorm or RMSNorm) to the T rows of x into out.
func (g *Graph) norm(n *Norm, out, x nn.Tensor, T int) {
	if n.RMS {
		g.b.RMSNorm(out, x, T, n.W, n.Eps)
		return
	}
	g.b.LayerNorm(out, x, T, n.W, n.B, n.Eps)
}

// biasAct is x ← act(x + b), skipped when there is neither.
func (g *Graph) biasAct(x nn.Tensor, T int, bias []float32, act nn.Activation) {
	if bias != nil || act != nn.ActNone {
		g.b.BiasAct(x, T, bias, act)
	}
}

func activation(a Act) nn.Activation {
	if a == ActGELUErf {
		return nn.ActGELUErf
	}
	return nn.ActGELUTanh
}

// Encode runs one image through the tower and projector and returns its
// merged, projected tokens [Merged, text_hidden_size] (architecture.md
// §6.2):
//
//	x = patches·W_pe + b_pe (+ InterpPosEmb for divided_fixed)
//	per block: x += wo(Attn(RoPE(q), RoPE(k), v)), (q, k, v) = wqkv(norm0(x))
//	           x += fc1(act(fc0(norm1(x))))
//	x = final_norm(x); merge each mh×mw window (consecutive rows) into one
//	row of D·mh·mw; y = [post_norm](proj.2(act(proj.0([pre_norm] merge))))
//
// with 2D RoPE at each patch's (row, col). Attention spans the image's
// patches only. Each block ends a layer (the GPU submits it).
func (g *Graph) Encode(px *imageio.Patches) ([]float32, error) {
	t, b := g.t, g.b
	c := t.Cfg
	D, H, hd, Q := c.Hidden, c.Heads, c.HeadDim(), c.QKVHidden
	if err := c.CheckPatches(px); err != nil {
		return nil, err
	}
	N := px.N()
	if N > g.MaxN {
		return nil, fmt.Errorf("vision encode: %d patches (%dx%d grid) exceed the tower's %d (max_pixels)", N, px.GridH, px.GridW, g.MaxN)
	}
	rows, cols := make([]int, N), make([]int, N)
	for i := range N {
		rows[i], cols[i] = px.Pos(i)
	}
	cos, sin := RoPE2DTable(rows, cols, hd, c.RopeTheta)
	b.Begin()
	// the host inputs first (a backend may write them straight into its
	// memory, ahead of any op)
	b.SetRows(g.px, px.Data, N)
	b.SetRows(g.cos, cos, N)
	b.SetRows(g.sin, sin, N)
	if c.PosEmb == PosDividedFixed {
		pe := InterpPosEmb(t.PosEmb, c.PosEmbH, c.PosEmbW, D, px.GridH, px.GridW)
		ordered := make([]float32, N*D)
		for i := range N {
			o := (rows[i]*px.GridW + cols[i]) * D
			copy(ordered[i*D:(i+1)*D], pe[o:o+D])
		}
		b.SetRows(g.pos, ordered, N)
	}
	x := g.x
	b.Linear(x, g.px, N, t.PatchW)
	g.biasAct(x, N, t.PatchB, nn.ActNone)
	if c.PosEmb == PosDividedFixed {
		b.Add(x, g.pos, N)
	}
	q, k, v := b.Cols(g.qkv, 0, Q), b.Cols(g.qkv, Q, Q), b.Cols(g.qkv, 2*Q, Q)
	for i := range t.Blocks {
		bl := &t.Blocks[i]
		g.norm(&bl.Norm0, g.xn, x, N)
		b.Linear(g.qkv, g.xn, N, bl.WQKV)
		g.biasAct(g.qkv, N, bl.BQKV, nn.ActNone)
		b.RoPE2D(q, N, H, hd, g.cos, g.sin)
		b.RoPE2D(k, N, H, hd, g.cos, g.sin)
		b.ImageAttention(g.att, q, k, v, N, H, hd)
		b.Linear(g.o, g.att, N, bl.WO)
		g.biasAct(g.o, N, bl.BO, nn.ActNone)
		b.Add(x, g.o, N)
		g.norm(&bl.Norm1, g.xn, x, N)
		b.Linear(g.hid, g.xn, N, bl.FC0)
		g.biasAct(g.hid, N, bl.B0, activation(c.Act))
		b.Linear(g.o, g.hid, N, bl.FC1)
		g.biasAct(g.o, N, bl.B1, nn.ActNone)
		b.Add(x, g.o, N)
		nn.EndLayer(b, N)
	}
	g.norm(&t.FinalNorm, x, x, N)
	if t.PreNorm != nil {
		g.norm(t.PreNorm, x, x, N)
	}
	// Merge: the rows of a window are consecutive, so [N, D] is [Nm, M].
	Nm, TH := px.Merged(), c.TextHidden
	b.Linear(g.mh, b.Reshape(x, c.MergedDim()), Nm, t.Proj0)
	g.biasAct(g.mh, Nm, t.ProjB0, activation(c.ProjAct))
	b.Linear(g.out, g.mh, Nm, t.Proj2)
	g.biasAct(g.out, Nm, t.ProjB2, nn.ActNone)
	if t.PostNorm != nil {
		g.norm(t.PostNorm, g.out, g.out, Nm)
	}
	if err := b.Err(); err != nil {
		return nil, fmt.Errorf("vision encode: %w", err)
	}
	res := make([]float32, Nm*TH)
	if err := b.Read(g.out, Nm, res); err != nil {
		return nil, fmt.Errorf("vision encode: read back: %w", err)
	}
	return res, nil
}

// CheckPatches reports patches the tower cannot encode: the wrong patch
// size or merge kernel, a grid that is not a multiple of the merge kernel,
// or a data length that does not match the grid.
func (c *Config) CheckPatches(px *imageio.Patches) error {
	switch {
	case px == nil:
		return fmt.Errorf("vision encode: no patches")
	case px.PatchSize != c.PatchSize || px.Dim != 3*c.PatchSize*c.PatchSize:
		return fmt.Errorf("vision encode: patches of size %d (dim %d), the tower wants patch_size %d (dim %d)", px.PatchSize, px.Dim, c.PatchSize, 3*c.PatchSize*c.PatchSize)
	case px.MergeH != c.MergeH || px.MergeW != c.MergeW:
		return fmt.Errorf("vision encode: patches merged %dx%d, the tower wants merge_kernel_size %dx%d", px.MergeH, px.MergeW, c.MergeH, c.MergeW)
	case px.GridH <= 0 || px.GridW <= 0 || px.GridH%c.MergeH != 0 || px.GridW%c.MergeW != 0:
		return fmt.Errorf("vision encode: patch grid %dx%d is not a positive multiple of the merge kernel %dx%d", px.GridH, px.GridW, c.MergeH, c.MergeW)
	case len(px.Data) != px.N()*px.Dim:
		return fmt.Errorf("vision encode: %d patch values, a %dx%d grid needs %d", len(px.Data), px.GridH, px.GridW, px.N()*px.Dim)
	}
	return nil
}
