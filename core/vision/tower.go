package vision

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

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
	W, B []float32
	RMS  bool
	Eps  float32
}

// Apply normalises each row of x (rows of len(W)) into out.
func (n *Norm) Apply(out, x []float32) {
	if n.RMS {
		ref.RMSNorm(out, x, n.W, n.Eps)
		return
	}
	ref.LayerNorm(out, x, n.W, n.B, n.Eps)
}

// Block is one pre-norm ViT block:
//
//	x += wo(Attn(RoPE(q), RoPE(k), v)),  (q, k, v) = wqkv(norm0(x))
//	x += fc1(act(fc0(norm1(x))))
type Block struct {
	Norm0, Norm1 Norm
	WQKV, WO     *tensor.Mat
	BQKV, BO     []float32 // nil without attn_bias
	FC0, FC1     *tensor.Mat
	B0, B1       []float32 // nil without linear_bias
}

// Tower is the vision tower and projector bound to weights.
type Tower struct {
	Cfg       *Config
	PatchW    *tensor.Mat // [D, 3·p·p] (Conv2d weight [D, 3, p, p] flattened)
	PatchB    []float32   // nil without patch_embed_proj_bias
	PosEmb    []float32   // [init_pos_emb_height, init_pos_emb_width, D]; nil for rope_2d
	Blocks    []Block
	FinalNorm Norm
	PreNorm   *Norm // patchmerger: LayerNorm over D before the merge
	PostNorm  *Norm // patchmergerv2: RMSNorm over the text width
	Proj0     *tensor.Mat
	Proj2     *tensor.Mat
	ProjB0    []float32
	ProjB2    []float32
}

// TensorSpec is one tensor of the vision checkpoint.
type TensorSpec struct {
	Name  string
	Shape []int
}

// Spec lists every tensor a checkpoint of c must hold (full names).
func Spec(c *Config) []TensorSpec {
	D, p, Q, I, M := c.Hidden, c.PatchSize, c.QKVHidden, c.Intermediate, c.MergedDim()
	var s []TensorSpec
	add := func(name string, shape ...int) { s = append(s, TensorSpec{name, shape}) }
	norm := func(prefix string, d int, rms bool) {
		add(prefix+".weight", d)
		if !rms {
			add(prefix+".bias", d)
		}
	}
	add("vision_tower.patch_embed.proj.weight", D, 3, p, p)
	if c.PatchBias {
		add("vision_tower.patch_embed.proj.bias", D)
	}
	if c.PosEmb == PosDividedFixed {
		add("vision_tower.patch_embed.pos_emb.weight", c.PosEmbH, c.PosEmbW, D)
	}
	for i := range c.Layers {
		b := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
		norm(b+"norm0", D, c.RMSNorm)
		norm(b+"norm1", D, c.RMSNorm)
		add(b+"wqkv.weight", 3*Q, D)
		if c.AttnBias {
			add(b+"wqkv.bias", 3*Q)
		}
		add(b+"wo.weight", D, Q)
		if c.AttnBias {
			add(b+"wo.bias", D)
		}
		add(b+"mlp.fc0.weight", I, D)
		if c.LinBias {
			add(b+"mlp.fc0.bias", I)
		}
		add(b+"mlp.fc1.weight", D, I)
		if c.LinBias {
			add(b+"mlp.fc1.bias", D)
		}
	}
	norm("vision_tower.encoder.final_layernorm", D, c.RMSNorm)
	if c.Projector == ProjPatchMerger {
		norm("mm_projector.pre_norm", D, false)
	}
	add("mm_projector.proj.0.weight", M, M)
	if c.LinBias {
		add("mm_projector.proj.0.bias", M)
	}
	add("mm_projector.proj.2.weight", c.TextHidden, M)
	if c.LinBias {
		add("mm_projector.proj.2.bias", c.TextHidden)
	}
	if c.Projector == ProjPatchMergerV2 {
		add("mm_projector.post_norm.weight", c.TextHidden)
	}
	return s
}

// IsVisionTensor reports whether a checkpoint tensor belongs to the vision
// tower or projector (the names Load binds).
func IsVisionTensor(name string) bool {
	return strings.HasPrefix(name, "vision_tower.") || strings.HasPrefix(name, "mm_projector.")
}

// Load binds the vision tensors of ck for config c. Every tensor of Spec
// must be present with its exact shape and an F32, F16 or BF16 dtype, and
// any other vision_tower.* / mm_projector.* tensor is an error. Matrices
// keep their half-precision storage; vectors are widened to float32.
func Load(c *Config, ck *safetensors.Checkpoint) (*Tower, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	got := map[string]any{}
	for _, s := range Spec(c) {
		t, ok := ck.Tensor(s.Name)
		if !ok {
			return nil, fmt.Errorf("tensor %s: missing from checkpoint (expected shape %v)", s.Name, s.Shape)
		}
		if !slices.Equal(t.Shape, s.Shape) {
			return nil, fmt.Errorf("tensor %s: expected shape %v, found %v", s.Name, s.Shape, t.Shape)
		}
		raw, err := ck.Bytes(s.Name)
		if err != nil {
			return nil, err
		}
		rows := s.Shape[0]
		cols := len(raw) / dtypeSize(string(t.DType)) / max(1, rows)
		var m *tensor.Mat
		switch t.DType {
		case "F32":
			f := make([]float32, len(raw)/4)
			for i := range f {
				f[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[i*4:]))
			}
			m = tensor.NewF32(rows, cols, f)
		case "F16", "BF16":
			u := make([]uint16, len(raw)/2)
			for i := range u {
				u[i] = binary.LittleEndian.Uint16(raw[i*2:])
			}
			dt := tensor.F16
			if t.DType == "BF16" {
				dt = tensor.BF16
			}
			m = tensor.NewHalf(rows, cols, dt, u)
		default:
			return nil, fmt.Errorf("tensor %s: dtype %s is not supported (want F32, F16 or BF16)", s.Name, t.DType)
		}
		if len(s.Shape) == 2 {
			got[s.Name] = m
		} else {
			got[s.Name] = m.Float32()
		}
	}
	var extra []string
	for _, n := range ck.Names() {
		if IsVisionTensor(n) && got[n] == nil {
			extra = append(extra, n)
		}
	}
	if len(extra) > 0 {
		sort.Strings(extra)
		return nil, fmt.Errorf("checkpoint has vision tensors the vision_config does not use: %s", strings.Join(extra, ", "))
	}
	return bind(c, got), nil
}

func dtypeSize(dt string) int {
	if dt == "F32" {
		return 4
	}
	return 2
}

// bind assembles a Tower from tensors by name (matrices as *tensor.Mat,
// everything else as []float32; the 4-D patch weight arrives as []float32).
func bind(c *Config, got map[string]any) *Tower {
	vec := func(n string) []float32 {
		if v, ok := got[n].([]float32); ok {
			return v
		}
		if m, ok := got[n].(*tensor.Mat); ok { // 1-row case never happens; keep safe
			return m.Float32()
		}
		return nil
	}
	mat := func(n string) *tensor.Mat { m, _ := got[n].(*tensor.Mat); return m }
	norm := func(prefix string, rms bool, eps float32) Norm {
		return Norm{W: vec(prefix + ".weight"), B: vec(prefix + ".bias"), RMS: rms, Eps: eps}
	}
	D, p := c.Hidden, c.PatchSize
	t := &Tower{Cfg: c}
	t.PatchW = tensor.NewF32(D, 3*p*p, vec("vision_tower.patch_embed.proj.weight"))
	t.PatchB = vec("vision_tower.patch_embed.proj.bias")
	t.PosEmb = vec("vision_tower.patch_embed.pos_emb.weight")
	for i := range c.Layers {
		b := fmt.Sprintf("vision_tower.encoder.blocks.%d.", i)
		t.Blocks = append(t.Blocks, Block{
			Norm0: norm(b+"norm0", c.RMSNorm, c.NormEps), Norm1: norm(b+"norm1", c.RMSNorm, c.NormEps),
			WQKV: mat(b + "wqkv.weight"), BQKV: vec(b + "wqkv.bias"),
			WO: mat(b + "wo.weight"), BO: vec(b + "wo.bias"),
			FC0: mat(b + "mlp.fc0.weight"), B0: vec(b + "mlp.fc0.bias"),
			FC1: mat(b + "mlp.fc1.weight"), B1: vec(b + "mlp.fc1.bias"),
		})
	}
	t.FinalNorm = norm("vision_tower.encoder.final_layernorm", c.RMSNorm, c.NormEps)
	if c.Projector == ProjPatchMerger {
		n := norm("mm_projector.pre_norm", false, c.ProjEps)
		t.PreNorm = &n
	} else {
		n := norm("mm_projector.post_norm", true, c.ProjEps)
		t.PostNorm = &n
	}
	t.Proj0, t.ProjB0 = mat("mm_projector.proj.0.weight"), vec("mm_projector.proj.0.bias")
	t.Proj2, t.ProjB2 = mat("mm_projector.proj.2.weight"), vec("mm_projector.proj.2.bias")
	return t
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
	x := g.x
	b.SetRows(g.px, px.Data, N)
	b.SetRows(g.cos, cos, N)
	b.SetRows(g.sin, sin, N)
	b.Linear(x, g.px, N, t.PatchW)
	g.biasAct(x, N, t.PatchB, nn.ActNone)
	if c.PosEmb == PosDividedFixed {
		pe := InterpPosEmb(t.PosEmb, c.PosEmbH, c.PosEmbW, D, px.GridH, px.GridW)
		ordered := make([]float32, N*D)
		for i := range N {
			o := (rows[i]*px.GridW + cols[i]) * D
			copy(ordered[i*D:(i+1)*D], pe[o:o+D])
		}
		b.SetRows(g.pos, ordered, N)
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
