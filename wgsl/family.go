//go:build cgo || (js && !cpuonly)

package wgsl

import "fmt"

// Op wrappers of family.wgsl: the qwen3_next and deepseek_v3 families'
// head repeat and RoPE (CPU forms: ref.RepeatHeads, ref.RoPE).

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
