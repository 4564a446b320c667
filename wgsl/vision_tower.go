//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/vision"
)

// VisionTower is a vision.Tower (tower and projector) on the GPU: the
// tower's forward pass (vision.Graph, the one the CPU runs) over the
// WebGPU backend, weights uploaded once, activations sized by
// NewVisionTower for the largest image the config's max_pixels allows;
// Encode allocates no GPU objects. Not safe for concurrent use.
type VisionTower struct {
	d    *Device
	b    *gpu
	g    *vision.Graph
	maxN int
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
	v := &VisionTower{d: d, b: newGPU(d, 0), maxN: maxPatches}
	t.Declare(v.b)
	if v.b.err == nil {
		v.g = t.Build(v.b, maxPatches)
	}
	err := v.b.err
	if err == nil {
		if err = d.ReserveVisionAttention(maxPatches, c.Heads, c.HeadDim()); err != nil {
			err = fmt.Errorf("wgsl: vision tower: attention scratch: %w", err)
		}
	}
	if err == nil {
		err = d.Sync()
	}
	if err != nil {
		v.Close()
		return nil, fmt.Errorf("wgsl: vision tower: %w", err)
	}
	return v, nil
}

// Close releases the tower's buffers (not the Device).
func (v *VisionTower) Close() {
	if v == nil || v.b == nil {
		return
	}
	_ = v.d.Sync()
	v.b.release()
	v.g = nil
}

// MaxPatches is the largest patch count Encode accepts.
func (v *VisionTower) MaxPatches() int { return v.maxN }

// Encode is vision.Graph.Encode on the GPU: it returns the image's merged,
// projected tokens [px.Merged(), text_hidden_size]. Each block is its own
// submission.
func (v *VisionTower) Encode(px *imageio.Patches) ([]float32, error) {
	if v == nil || v.g == nil {
		return nil, fmt.Errorf("wgsl: vision encode: closed tower")
	}
	if err := v.d.Flush(); err != nil {
		return nil, err
	}
	defer v.b.end()
	out, err := v.g.Encode(px)
	if err != nil {
		return nil, fmt.Errorf("wgsl: %w", err)
	}
	return out, nil
}

// ---- the vision ops of the backend (nn.VisionBackend) ----

func actCode(a nn.Activation) int {
	switch a {
	case nn.ActGELUTanh:
		return ActGELUTanh
	case nn.ActGELUErf:
		return ActGELUErf
	}
	return ActNone
}

// optVec is vec for an optional vector (nil: a nil view, "none").
func (b *gpu) optVec(v []float32) View {
	if v == nil {
		return View{}
	}
	return b.vec(v)
}

func (b *gpu) LayerNorm(out, x nn.Tensor, T int, w, bias []float32, eps float32) {
	if b.err == nil {
		b.fail(b.d.LayerNorm(g(out).s(), g(x).s(), b.vec(w), b.optVec(bias), T, len(w), eps))
	}
}

func (b *gpu) BiasAct(x nn.Tensor, T int, bias []float32, act nn.Activation) {
	if b.err == nil {
		s := g(x)
		b.fail(b.d.BiasAct(s.s(), s.s(), b.optVec(bias), T, s.cols, actCode(act)))
	}
}

func (b *gpu) RoPE2D(x nn.Tensor, T, H, hd int, cos, sin nn.Tensor) {
	if b.err == nil {
		b.fail(b.d.RoPE2D(g(x).s(), g(cos).v, g(sin).v, T, H, hd))
	}
}

// ImageAttention takes q, k, v as column views of one fused row.
func (b *gpu) ImageAttention(out, q, k, v nn.Tensor, T, H, hd int) {
	if b.err != nil {
		return
	}
	qt, kt, vt := g(q), g(k), g(v)
	if kt.v.Buf != qt.v.Buf || vt.v.Buf != qt.v.Buf || kt.stride != qt.stride || vt.stride != qt.stride {
		b.fail(fmt.Errorf("wgsl: ImageAttention: q, k, v must be views of one fused row"))
		return
	}
	b.fail(b.d.VisionAttention(&VisionAttnArgs{N: T, H: H, HD: hd, QKV: qt.v, Stride: qt.stride,
		QOff: 0, KOff: kt.v.Off - qt.v.Off, VOff: vt.v.Off - qt.v.Off, Out: g(out).s()}))
}

func (b *gpu) Read(t nn.Tensor, T int, dst []float32) error {
	if b.err != nil {
		return b.err
	}
	x := g(t)
	if !x.contiguous() {
		return fmt.Errorf("wgsl: Read of a strided tensor")
	}
	return b.d.ReadF32(x.v, dst[:T*x.cols])
}
