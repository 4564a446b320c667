//go:build cgo || js

package wgsl

import "fmt"

// The ops of the qwen3_next and deepseek_v3 families (family.wgsl,
// gqa.wgsl); their CPU forms are core/ref's RepeatHeads, RoPE and GQA.

// Repeat records out row t = each group of d values of x row t repeated r
// times in place (ref.RepeatHeads), for T rows of n values of x (n a
// multiple of d); out rows hold n·r values. out must not overlap x.
func (d *Device) Repeat(out, x Strided, T, n, dd, r int) error {
	if T <= 0 {
		return nil
	}
	if dd <= 0 || r <= 0 || n%dd != 0 {
		return fmt.Errorf("wgsl: Repeat: %d values in groups of %d, repeated %d times", n, dd, r)
	}
	if err := x.check(T, n, "Repeat x"); err != nil {
		return err
	}
	if err := out.check(T, n*r, "Repeat out"); err != nil {
		return err
	}
	k, err := d.kernel("family.wgsl", "repeat", 2)
	if err != nil {
		return err
	}
	p := params{}.u(T, n, dd, r, x.Off, x.Stride, out.Off, out.Stride).u(0, 0, 0, 0, 0, 0, 0)
	return d.dispatch(k, p, []*Buffer{x.Buf, out.Buf}, (T*n*r+63)/64)
}

// RoPEArgs are the operands of RoPE: in each of T rows of X (row stride
// X.Stride), Heads heads HStride values apart, the first at column Off, are
// rotated over their first 2·Half channels at positions Pos0+t. Table holds
// ref.RoPE.Table's cos/sin [position, Half, 2] for positions 0 … at least
// Pos0+T−1 (a backend uploads it once for its longest context).
type RoPEArgs struct {
	T, Heads, HStride, Off, Half, Pos0 int
	Interleaved                        bool
	X                                  Strided
	Table                              View
}

// RoPE records the rotary embedding of a (ref.RoPE.Apply) in place.
func (d *Device) RoPE(a RoPEArgs) error {
	if a.T <= 0 || a.Heads <= 0 {
		return nil
	}
	if a.Half <= 0 || a.HStride < 2*a.Half {
		return fmt.Errorf("wgsl: RoPE: %d rotated pairs in heads of %d", a.Half, a.HStride)
	}
	if err := a.X.check(a.T, a.Off+(a.Heads-1)*a.HStride+2*a.Half, "RoPE x"); err != nil {
		return err
	}
	if err := a.Table.check((a.Pos0+a.T)*a.Half*2, "RoPE table"); err != nil {
		return err
	}
	k, err := d.kernel("family.wgsl", "rope", 2)
	if err != nil {
		return err
	}
	p := params{}.u(a.T, 0, 0, 0, a.X.Off, a.X.Stride, 0, 0).u(a.Heads, a.HStride, a.Off, a.Half, b2i(a.Interleaved), a.Pos0, a.Table.Off)
	return d.dispatch(k, p, []*Buffer{a.X.Buf, a.Table.Buf}, (a.T*a.Heads*a.Half+63)/64)
}

// GQAArgs are the operands of GQA: Q, O [N, H·D] for queries at positions
// Pos0 … Pos0+N−1 over Cache rows [k (HKV·D); v (HKV·D)] (Width 2·HKV·D),
// whose first Pos0+N rows are filled.
type GQAArgs struct {
	N, H, HKV, D, Pos0 int
	Scale              float32
	Q, O               View
	Cache              *LatentCache
}

// GQA records causal grouped-query softmax attention (ref.GQA): per tile of
// at most 128 cached keys (a tile never straddles a cache page), one
// workgroup per (query, head) folds the tile into an online softmax (state
// in a device scratch buffer; the last tile normalises). Memory is
// O(N·H) whatever the context length.
func (d *Device) GQA(a *GQAArgs) error {
	if a.N <= 0 {
		return nil
	}
	if a.H <= 0 || a.HKV <= 0 || a.D <= 0 || a.H%a.HKV != 0 {
		return fmt.Errorf("wgsl: GQA: %d heads over %d KV heads of %d", a.H, a.HKV, a.D)
	}
	if a.Cache == nil || a.Cache.Width != 2*a.HKV*a.D || a.Cache.Len < a.Pos0+a.N {
		return fmt.Errorf("wgsl: GQA: the cache must hold rows of %d floats for %d positions", 2*a.HKV*a.D, a.Pos0+a.N)
	}
	if err := a.Q.check(a.N*a.H*a.D, "GQA Q"); err != nil {
		return err
	}
	if err := a.O.check(a.N*a.H*a.D, "GQA O"); err != nil {
		return err
	}
	nh := a.N * a.H
	T, err := d.scratchBuf("gqa", 2*nh)
	if err != nil {
		return err
	}
	k, err := d.kernel("gqa.wgsl", "attn", 4)
	if err != nil {
		return err
	}
	end := a.Pos0 + a.N
	for k0 := 0; k0 < end; k0 += mlaTile {
		kn := min(mlaTile, end-k0)
		s := a.Cache.spans(k0, kn)[0]
		p := params{}.u(a.N, a.H, a.HKV, a.D, a.Pos0).f(a.Scale).
			u(a.Q.Off, a.O.Off, a.Cache.Width, k0-s.local, k0, kn, b2i(k0+kn >= end), 0)
		if err := d.dispatch(k, p, []*Buffer{a.Q.Buf, s.page, a.O.Buf, T}, nh); err != nil {
			return err
		}
	}
	return nil
}
