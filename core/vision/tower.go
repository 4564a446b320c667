package vision

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/core/imageio"
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
	LayerNorm(out, x, n.W, n.B, n.Eps)
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

// Encode runs one image through the tower and projector and returns its
// merged, projected tokens [Merged, text_hidden_size]:
//
//	x = patches·W_pe + b_pe (+ InterpPosEmb for divided_fixed)
//	x = Block_L(…Block_1(x)) with 2D RoPE at each patch's (row, col)
//	x = final_norm(x); merge each mh×mw window (consecutive rows) into one
//	row of D·mh·mw; y = [post_norm](proj.2(act(proj.0([pre_norm] merge))))
//
// Attention spans the image's patches only. p may be nil (single thread).
func (t *Tower) Encode(p *ref.Pool, px *imageio.Patches) ([]float32, error) {
	c := t.Cfg
	D, H, hd, Q := c.Hidden, c.Heads, c.HeadDim(), c.QKVHidden
	if err := c.CheckPatches(px); err != nil {
		return nil, err
	}
	N := px.N()
	x := make([]float32, N*D)
	ref.Linear(p, x, px.Data, N, t.PatchW)
	AddBias(x, t.PatchB)
	rows, cols := make([]int, N), make([]int, N)
	for i := range N {
		rows[i], cols[i] = px.Pos(i)
	}
	if c.PosEmb == PosDividedFixed {
		pe := InterpPosEmb(t.PosEmb, c.PosEmbH, c.PosEmbW, D, px.GridH, px.GridW)
		for i := range N {
			o := (rows[i]*px.GridW + cols[i]) * D
			ref.Axpy(1, pe[o:o+D], x[i*D:(i+1)*D])
		}
	}
	cos, sin := RoPE2DTable(rows, cols, hd, c.RopeTheta)
	xn := make([]float32, N*D)
	qkv := make([]float32, N*3*Q)
	q, k, v := make([]float32, N*Q), make([]float32, N*Q), make([]float32, N*Q)
	att := make([]float32, N*Q)
	o := make([]float32, N*D)
	hid := make([]float32, N*c.Intermediate)
	for _, b := range t.Blocks {
		b.Norm0.Apply(xn, x)
		ref.Linear(p, qkv, xn, N, b.WQKV)
		AddBias(qkv, b.BQKV)
		for n := range N {
			r := qkv[n*3*Q:]
			copy(q[n*Q:(n+1)*Q], r[:Q])
			copy(k[n*Q:(n+1)*Q], r[Q:2*Q])
			copy(v[n*Q:(n+1)*Q], r[2*Q:3*Q])
		}
		ApplyRoPE(q, N, H, hd, cos, sin)
		ApplyRoPE(k, N, H, hd, cos, sin)
		Attention(p, att, q, k, v, N, H, hd)
		ref.Linear(p, o, att, N, b.WO)
		AddBias(o, b.BO)
		ref.Axpy(1, o, x)
		b.Norm1.Apply(xn, x)
		ref.Linear(p, hid, xn, N, b.FC0)
		AddBias(hid, b.B0)
		c.Act.Apply(hid)
		ref.Linear(p, o, hid, N, b.FC1)
		AddBias(o, b.B1)
		ref.Axpy(1, o, x)
	}
	t.FinalNorm.Apply(x, x)
	return t.Project(p, x, N)
}

// Project applies the mm_projector to tower outputs x ([N, D], rows in
// merge-window order) and returns [N/(mh·mw), text_hidden_size].
func (t *Tower) Project(p *ref.Pool, x []float32, N int) ([]float32, error) {
	c := t.Cfg
	k := c.MergeH * c.MergeW
	if N%k != 0 || len(x) < N*c.Hidden {
		return nil, fmt.Errorf("vision project: %d patches do not fill %d-patch merge windows", N, k)
	}
	Nm, M := N/k, c.MergedDim()
	if t.PreNorm != nil {
		t.PreNorm.Apply(x, x)
	}
	// Merge: rows of a window are consecutive, so [N, D] is [Nm, M].
	h := make([]float32, Nm*M)
	ref.Linear(p, h, x[:N*c.Hidden], Nm, t.Proj0)
	AddBias(h, t.ProjB0)
	c.ProjAct.Apply(h)
	out := make([]float32, Nm*c.TextHidden)
	ref.Linear(p, out, h, Nm, t.Proj2)
	AddBias(out, t.ProjB2)
	if t.PostNorm != nil {
		t.PostNorm.Apply(out, out)
	}
	return out, nil
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
