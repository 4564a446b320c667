//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"math"
)

// Vision tower activations for BiasAct (vision.Act plus none).
const (
	ActNone     = 0
	ActGELUTanh = 1 // gelu_pytorch_tanh (vision.GELUTanh)
	ActGELUErf  = 2 // exact GELU (vision.GELUErf; erf to 1.5e-7)
)

// vattnMaxHD is the largest head dimension VisionAttention takes (the
// kernel's private accumulator, MAXHD in vision.wgsl).
const vattnMaxHD = 256

// LayerNorm records out = (x − μ)/sqrt(σ² + eps)·w + b over rows of n
// (vision.LayerNorm, biased variance); b with a nil buffer means no bias.
// out may equal x.
func (d *Device) LayerNorm(out, x Strided, w, b View, rows, n int, eps float32) error {
	if rows <= 0 || n <= 0 {
		return fmt.Errorf("wgsl: LayerNorm: %d rows of %d", rows, n)
	}
	if err := x.check(rows, n, "LayerNorm x"); err != nil {
		return err
	}
	if err := out.check(rows, n, "LayerNorm out"); err != nil {
		return err
	}
	if err := w.check(n, "LayerNorm weight"); err != nil {
		return err
	}
	mode := 0
	if b.Buf != nil {
		if err := b.check(n, "LayerNorm bias"); err != nil {
			return err
		}
		mode = 1
	}
	k, err := d.kernel("vision.wgsl", "layernorm", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, mode).f(eps).u(x.Off, x.Stride, w.Off, b.Off, out.Off, out.Stride)
	return d.dispatch(k, p, []*Buffer{x.Buf, w.Buf, b.Buf, out.Buf}, rows)
}

// BiasAct records out[r, c] = act(x[r, c] + b[c]) over rows of n (bias
// skipped when b has a nil buffer; act is ActNone, ActGELUTanh or
// ActGELUErf). out may equal x.
func (d *Device) BiasAct(out, x Strided, b View, rows, n, act int) error {
	if rows <= 0 || n <= 0 {
		return nil
	}
	if act < ActNone || act > ActGELUErf {
		return fmt.Errorf("wgsl: BiasAct: unknown activation %d", act)
	}
	if err := x.check(rows, n, "BiasAct x"); err != nil {
		return err
	}
	if err := out.check(rows, n, "BiasAct out"); err != nil {
		return err
	}
	mode := act << 1
	if b.Buf != nil {
		if err := b.check(n, "BiasAct bias"); err != nil {
			return err
		}
		mode |= 1
	} else if act == ActNone {
		if out.Buf == x.Buf && out.Off == x.Off && out.Stride == x.Stride {
			return nil
		}
	}
	k, err := d.kernel("vision.wgsl", "bias_act", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, rows, mode).f(0).u(x.Off, x.Stride, b.Off, 0, out.Off, out.Stride)
	return d.dispatch(k, p, []*Buffer{x.Buf, b.Buf, nil, out.Buf}, (rows*n+255)/256)
}

// RoPE2D rotates, in place, the H heads of hd values in each of rows rows
// of x by the tables cos, sin [rows, hd/2] (vision.RoPE2DTable,
// vision.ApplyRoPE). x's rows may be strided (q or k inside a fused
// projection).
func (d *Device) RoPE2D(x Strided, cos, sin View, rows, H, hd int) error {
	if rows <= 0 || H <= 0 || hd <= 0 || hd%2 != 0 {
		return fmt.Errorf("wgsl: RoPE2D: %d rows, %d heads of %d (want an even head dimension)", rows, H, hd)
	}
	if err := x.check(rows, H*hd, "RoPE2D x"); err != nil {
		return err
	}
	if err := cos.check(rows*hd/2, "RoPE2D cos"); err != nil {
		return err
	}
	if err := sin.check(rows*hd/2, "RoPE2D sin"); err != nil {
		return err
	}
	if cos.Buf == x.Buf || sin.Buf == x.Buf {
		return fmt.Errorf("wgsl: RoPE2D: the tables must not share x's buffer")
	}
	if cos.Off != 0 || sin.Off != 0 {
		return fmt.Errorf("wgsl: RoPE2D: tables must start at word 0 of their buffers")
	}
	k, err := d.kernel("vision.wgsl", "rope2d", 4)
	if err != nil {
		return err
	}
	p := params{}.u(0, rows, 0).f(0).u(x.Off, x.Stride, 0, 0, 0, 0, H, hd)
	return d.dispatch(k, p, []*Buffer{x.Buf, cos.Buf, sin.Buf, nil}, (rows*H*hd/2+255)/256)
}

// VisionAttnArgs describe non-causal attention within one image: N
// patches, H heads of HD; q, k, v rows of QKV (row n at Off + n·Stride,
// the fused wqkv output) at column offsets QOff, KOff, VOff; out [N, H·HD]
// rows at Out.Off + n·Out.Stride.
type VisionAttnArgs struct {
	N, H, HD         int
	QKV              View
	Stride           int
	QOff, KOff, VOff int
	Out              Strided
}

// vattnTile is the key tile of one attention invocation: each loops at
// most tile·(2·hd + 1) + 2·hd times, well under loopBudget.
func vattnTile(hd int) int { return max(1, (loopBudget/2-2*hd)/(2*hd+1)) }

// VisionAttentionScratch is the scratch (in words) VisionAttention needs
// for N patches of H heads of hd; reserve it up front with
// ReserveVisionAttention so encoding allocates nothing.
func VisionAttentionScratch(N, H, hd int) int {
	tile := vattnTile(hd)
	return (N + tile - 1) / tile * N * H * (hd + 2)
}

// ReserveVisionAttention sizes the device's attention scratch for N
// patches of H heads of hd.
func (d *Device) ReserveVisionAttention(N, H, hd int) error {
	_, err := d.scratchBuf("vattn", VisionAttentionScratch(N, H, hd))
	return err
}

// VisionAttention records out[n, h] = Σ_m softmax_m(q[n,h]·k[m,h]/√hd)·
// v[m,h] over all N patches (vision.Attention): key tiles of vattnTile(hd)
// are reduced with an online softmax, then combined.
func (d *Device) VisionAttention(a *VisionAttnArgs) error {
	N, H, hd := a.N, a.H, a.HD
	if N <= 0 || H <= 0 || hd <= 0 {
		return fmt.Errorf("wgsl: VisionAttention: N %d, H %d, hd %d", N, H, hd)
	}
	if hd > vattnMaxHD {
		return fmt.Errorf("wgsl: VisionAttention: head dimension %d > %d", hd, vattnMaxHD)
	}
	Q := H * hd
	for _, o := range []struct {
		off  int
		name string
	}{{a.QOff, "q"}, {a.KOff, "k"}, {a.VOff, "v"}} {
		if o.off < 0 || o.off+Q > a.Stride {
			return fmt.Errorf("wgsl: VisionAttention: %s columns [%d, %d) outside rows of %d", o.name, o.off, o.off+Q, a.Stride)
		}
	}
	if err := a.QKV.check(rowsWords(N, a.Stride, a.Stride), "VisionAttention qkv"); err != nil {
		return err
	}
	if err := a.Out.check(N, Q, "VisionAttention out"); err != nil {
		return err
	}
	if a.Out.Buf == a.QKV.Buf {
		return fmt.Errorf("wgsl: VisionAttention: out must not share the qkv buffer")
	}
	tile := vattnTile(hd)
	nsplit := (N + tile - 1) / tile
	scr, err := d.scratchBuf("vattn", VisionAttentionScratch(N, H, hd))
	if err != nil {
		return err
	}
	kp, err := d.kernel("vision.wgsl", "attn_partial", 4)
	if err != nil {
		return err
	}
	kc, err := d.kernel("vision.wgsl", "attn_combine", 4)
	if err != nil {
		return err
	}
	scale := float32(1 / math.Sqrt(float64(hd)))
	p := params{}.u(0, N, 0).f(0).u(0, a.Stride, 0, 0, 0, 0, H, hd, tile, nsplit).f(scale).
		u(a.QKV.Off+a.QOff, a.QKV.Off+a.KOff, a.QKV.Off+a.VOff)
	if err := d.dispatch(kp, p, []*Buffer{a.QKV.Buf, nil, nil, scr}, (N*H*nsplit+63)/64); err != nil {
		return err
	}
	p = params{}.u(0, N, 0).f(0).u(0, 0, 0, 0, a.Out.Off, a.Out.Stride, H, hd, tile, nsplit).f(scale).u(0, 0, 0)
	return d.dispatch(kc, p, []*Buffer{scr, nil, nil, a.Out.Buf}, (N*H*hd+255)/256)
}
