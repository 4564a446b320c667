//go:build cgo || js

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/core/vision"
)

// VisionTower is a vision.Tower (tower and projector) on the GPU: weights
// uploaded once, activations sized by NewVisionTower for the largest
// image the config's max_pixels allows; Encode allocates no GPU objects.
// Not safe for concurrent use.
type VisionTower struct {
	d    *Device
	t    *vision.Tower
	maxN int
	bufs []*Buffer

	patchW       *Mat
	patchB       View
	blocks       []gpuVisionBlock
	final        gpuNorm
	preNorm      *gpuNorm
	postNorm     *gpuNorm
	proj0, proj2 *Mat
	projB0       View
	projB2       View

	// activations
	px, x, xn, qkv, att, o, hid *Buffer
	cos, sin, pos               *Buffer
	mh, out                     *Buffer
}

type gpuNorm struct {
	w, b View
	rms  bool
	eps  float32
}

type gpuVisionBlock struct {
	norm0, norm1      gpuNorm
	wqkv, wo, fc0, f1 *Mat
	bqkv, bo, b0, b1  View
}

// MaxPatches is the largest patch count (grid rows × columns) an image
// preprocessed with c can have: max_pixels / patch².
func MaxPatches(c *vision.Config) int {
	return max(1, c.MaxPixels/(c.PatchSize*c.PatchSize))
}

// NewVisionTower uploads t to d and allocates activations for images of
// up to maxPatches patches (0: MaxPatches(t.Cfg)). The caller keeps d.
func NewVisionTower(d *Device, t *vision.Tower, maxPatches int) (*VisionTower, error) {
	if d == nil || t == nil || t.Cfg == nil {
		return nil, fmt.Errorf("wgsl: NewVisionTower: nil device or tower")
	}
	c := t.Cfg
	if maxPatches <= 0 {
		maxPatches = MaxPatches(c)
	}
	k := c.MergeH * c.MergeW
	maxPatches = (maxPatches + k - 1) / k * k
	if c.HeadDim() > vattnMaxHD || c.HeadDim()%2 != 0 {
		return nil, fmt.Errorf("wgsl: vision tower: head dimension %d (the GPU tower takes even head dimensions up to %d)", c.HeadDim(), vattnMaxHD)
	}
	v := &VisionTower{d: d, t: t, maxN: maxPatches}
	if err := v.load(); err != nil {
		v.Close()
		return nil, err
	}
	return v, nil
}

// Close releases the tower's buffers (not the Device).
func (v *VisionTower) Close() {
	if v == nil {
		return
	}
	_ = v.d.Sync()
	for _, b := range v.bufs {
		b.Release()
	}
	v.bufs = nil
}

// MaxPatches is the largest patch count Encode accepts.
func (v *VisionTower) MaxPatches() int { return v.maxN }

func (v *VisionTower) buf(words int, name string) (*Buffer, error) {
	if words > maxBindingWords {
		return nil, fmt.Errorf("wgsl: vision tower: %s of %d words exceeds one 128 MiB binding (lower max_pixels)", name, words)
	}
	b, err := v.d.NewBuffer(max(words, 1))
	if err != nil {
		return nil, fmt.Errorf("wgsl: vision tower: %s: %w", name, err)
	}
	v.bufs = append(v.bufs, b)
	return b, nil
}

func (v *VisionTower) vec(x []float32, name string) (View, error) {
	if x == nil {
		return View{}, nil
	}
	b, err := v.d.UploadF32(x)
	if err != nil {
		return View{}, fmt.Errorf("wgsl: vision tower: upload %s: %w", name, err)
	}
	v.bufs = append(v.bufs, b)
	return b.At(0), nil
}

func (v *VisionTower) load() error {
	t, c := v.t, v.t.Cfg
	var err error
	mat := func(m *tensor.Mat, name string) *Mat {
		if err != nil {
			return nil
		}
		if m == nil {
			err = fmt.Errorf("wgsl: vision tower: %s missing", name)
			return nil
		}
		var g *Mat
		if g, err = v.d.UploadMat(m); err != nil {
			err = fmt.Errorf("wgsl: vision tower: upload %s: %w", name, err)
			return nil
		}
		v.bufs = append(v.bufs, g.Buffers()...)
		return g
	}
	vec := func(x []float32, name string) View {
		if err != nil {
			return View{}
		}
		var r View
		r, err = v.vec(x, name)
		return r
	}
	norm := func(n *vision.Norm, name string) gpuNorm {
		return gpuNorm{w: vec(n.W, name+".weight"), b: vec(n.B, name+".bias"), rms: n.RMS, eps: n.Eps}
	}
	v.patchW = mat(t.PatchW, "patch_embed.proj.weight")
	v.patchB = vec(t.PatchB, "patch_embed.proj.bias")
	for i := range t.Blocks {
		b := &t.Blocks[i]
		p := fmt.Sprintf("blocks.%d.", i)
		v.blocks = append(v.blocks, gpuVisionBlock{
			norm0: norm(&b.Norm0, p+"norm0"), norm1: norm(&b.Norm1, p+"norm1"),
			wqkv: mat(b.WQKV, p+"wqkv.weight"), bqkv: vec(b.BQKV, p+"wqkv.bias"),
			wo: mat(b.WO, p+"wo.weight"), bo: vec(b.BO, p+"wo.bias"),
			fc0: mat(b.FC0, p+"mlp.fc0.weight"), b0: vec(b.B0, p+"mlp.fc0.bias"),
			f1: mat(b.FC1, p+"mlp.fc1.weight"), b1: vec(b.B1, p+"mlp.fc1.bias"),
		})
	}
	v.final = norm(&t.FinalNorm, "final_layernorm")
	if t.PreNorm != nil {
		n := norm(t.PreNorm, "mm_projector.pre_norm")
		v.preNorm = &n
	}
	if t.PostNorm != nil {
		n := norm(t.PostNorm, "mm_projector.post_norm")
		v.postNorm = &n
	}
	v.proj0, v.projB0 = mat(t.Proj0, "mm_projector.proj.0.weight"), vec(t.ProjB0, "mm_projector.proj.0.bias")
	v.proj2, v.projB2 = mat(t.Proj2, "mm_projector.proj.2.weight"), vec(t.ProjB2, "mm_projector.proj.2.bias")
	if err != nil {
		return err
	}
	N, D, Q, hd := v.maxN, c.Hidden, c.QKVHidden, c.HeadDim()
	Nm := N / (c.MergeH * c.MergeW)
	for _, a := range []struct {
		p     **Buffer
		words int
		name  string
	}{{&v.px, N * 3 * c.PatchSize * c.PatchSize, "patches"}, {&v.x, N * D, "x"}, {&v.xn, N * D, "xn"},
		{&v.qkv, N * 3 * Q, "qkv"}, {&v.att, N * Q, "attention"}, {&v.o, N * D, "o"}, {&v.hid, N * c.Intermediate, "mlp"},
		{&v.cos, N * hd / 2, "rope cos"}, {&v.sin, N * hd / 2, "rope sin"}, {&v.mh, Nm * c.MergedDim(), "projector"},
		{&v.out, Nm * c.TextHidden, "output"}} {
		if *a.p, err = v.buf(a.words, a.name); err != nil {
			return err
		}
	}
	if c.PosEmb == vision.PosDividedFixed {
		if v.pos, err = v.buf(N*D, "position embedding"); err != nil {
			return err
		}
	}
	if err := v.d.ReserveVisionAttention(N, c.Heads, hd); err != nil {
		return fmt.Errorf("wgsl: vision tower: attention scratch: %w", err)
	}
	return v.d.Sync()
}

func (v *VisionTower) norm(n *gpuNorm, out, x View, rows, width int) error {
	if n.rms {
		return v.d.RMSNorm(out, x, n.w, rows, width, n.eps)
	}
	return v.d.LayerNorm(out.Rows(width), x.Rows(width), n.w, n.b, rows, width, n.eps)
}

func actCode(a vision.Act) int {
	if a == vision.ActGELUErf {
		return ActGELUErf
	}
	return ActGELUTanh
}

// Encode is vision.Tower.Encode on the GPU: it returns the image's merged,
// projected tokens [px.Merged(), text_hidden_size]. Each block is its own
// submission.
func (v *VisionTower) Encode(px *imageio.Patches) ([]float32, error) {
	if v == nil || v.bufs == nil {
		return nil, fmt.Errorf("wgsl: vision encode: closed tower")
	}
	c, d := v.t.Cfg, v.d
	D, H, hd, Q, I := c.Hidden, c.Heads, c.HeadDim(), c.QKVHidden, c.Intermediate
	if err := c.CheckPatches(px); err != nil {
		return nil, err
	}
	if px.N() > v.maxN {
		return nil, fmt.Errorf("vision encode: %d patches (%dx%d grid) exceed the GPU tower's %d (max_pixels)", px.N(), px.GridH, px.GridW, v.maxN)
	}
	N := px.N()
	rows, cols := make([]int, N), make([]int, N)
	for i := range N {
		rows[i], cols[i] = px.Pos(i)
	}
	cos, sin := vision.RoPE2DTable(rows, cols, hd, c.RopeTheta)
	if err := d.Flush(); err != nil {
		return nil, err
	}
	if err := v.px.WriteF32(0, px.Data); err != nil {
		return nil, fmt.Errorf("wgsl: vision encode: upload patches: %w", err)
	}
	if err := v.cos.WriteF32(0, cos); err != nil {
		return nil, fmt.Errorf("wgsl: vision encode: upload rope table: %w", err)
	}
	if err := v.sin.WriteF32(0, sin); err != nil {
		return nil, fmt.Errorf("wgsl: vision encode: upload rope table: %w", err)
	}
	x, xn, qkv, att, o, hid := v.x.At(0), v.xn.At(0), v.qkv.At(0), v.att.At(0), v.o.At(0), v.hid.At(0)
	err := seq(
		func() error { return d.Linear(x, v.px.At(0), N, v.patchW) },
		func() error { return d.BiasAct(x.Rows(D), x.Rows(D), v.patchB, N, D, ActNone) },
		func() error {
			if c.PosEmb != vision.PosDividedFixed {
				return nil
			}
			pe := vision.InterpPosEmb(v.t.PosEmb, c.PosEmbH, c.PosEmbW, D, px.GridH, px.GridW)
			ordered := make([]float32, N*D)
			for i := range N {
				o := (rows[i]*px.GridW + cols[i]) * D
				copy(ordered[i*D:(i+1)*D], pe[o:o+D])
			}
			if err := v.pos.WriteF32(0, ordered); err != nil {
				return fmt.Errorf("wgsl: vision encode: upload position embedding: %w", err)
			}
			return d.Add(x, x, v.pos.At(0), N*D, 1)
		})
	if err != nil {
		return nil, fmt.Errorf("wgsl: vision encode: patch embedding: %w", err)
	}
	for i := range v.blocks {
		b := &v.blocks[i]
		err := seq(
			func() error { return v.norm(&b.norm0, xn, x, N, D) },
			func() error { return d.Linear(qkv, xn, N, b.wqkv) },
			func() error { return d.BiasAct(qkv.Rows(3*Q), qkv.Rows(3*Q), b.bqkv, N, 3*Q, ActNone) },
			func() error { return d.RoPE2D(qkv.Rows(3*Q), v.cos.At(0), v.sin.At(0), N, H, hd) },
			func() error { return d.RoPE2D(v.qkv.At(Q).Rows(3*Q), v.cos.At(0), v.sin.At(0), N, H, hd) },
			func() error {
				return d.VisionAttention(&VisionAttnArgs{N: N, H: H, HD: hd, QKV: qkv, Stride: 3 * Q,
					QOff: 0, KOff: Q, VOff: 2 * Q, Out: att.Rows(Q)})
			},
			func() error { return d.Linear(o, att, N, b.wo) },
			func() error { return d.BiasAct(o.Rows(D), o.Rows(D), b.bo, N, D, ActNone) },
			func() error { return d.Add(x, x, o, N*D, 1) },
			func() error { return v.norm(&b.norm1, xn, x, N, D) },
			func() error { return d.Linear(hid, xn, N, b.fc0) },
			func() error { return d.BiasAct(hid.Rows(I), hid.Rows(I), b.b0, N, I, actCode(c.Act)) },
			func() error { return d.Linear(o, hid, N, b.f1) },
			func() error { return d.BiasAct(o.Rows(D), o.Rows(D), b.b1, N, D, ActNone) },
			func() error { return d.Add(x, x, o, N*D, 1) },
			d.Flush)
		if err != nil {
			return nil, fmt.Errorf("wgsl: vision encode: block %d: %w", i, err)
		}
	}
	Nm, M, TH := px.Merged(), c.MergedDim(), c.TextHidden
	mh, out := v.mh.At(0), v.out.At(0)
	err = seq(
		func() error { return v.norm(&v.final, x, x, N, D) },
		func() error {
			if v.preNorm == nil {
				return nil
			}
			return v.norm(v.preNorm, x, x, N, D)
		},
		// Merge: the rows of a window are consecutive, so [N, D] is [Nm, M].
		func() error { return d.Linear(mh, x, Nm, v.proj0) },
		func() error { return d.BiasAct(mh.Rows(M), mh.Rows(M), v.projB0, Nm, M, actCode(c.ProjAct)) },
		func() error { return d.Linear(out, mh, Nm, v.proj2) },
		func() error { return d.BiasAct(out.Rows(TH), out.Rows(TH), v.projB2, Nm, TH, ActNone) },
		func() error {
			if v.postNorm == nil {
				return nil
			}
			return v.norm(v.postNorm, out, out, Nm, TH)
		})
	if err != nil {
		return nil, fmt.Errorf("wgsl: vision encode: projector: %w", err)
	}
	res := make([]float32, Nm*TH)
	if err := d.ReadF32(out, res); err != nil {
		return nil, fmt.Errorf("wgsl: vision encode: read back: %w", err)
	}
	return res, nil
}

// seq runs fs in order, stopping at the first error.
func seq(fs ...func() error) error {
	for _, f := range fs {
		if err := f(); err != nil {
			return err
		}
	}
	return nil
}
