//go:build cgo || (js && !cpuonly)

package wgsl

import "fmt"

// Op wrappers of gqa.wgsl: grouped-query attention (CPU form: ref.GQA).

// gqaTile is the number of cached keys one GQA dispatch folds in: a tile
// must not straddle a cache page, so it divides the page size (a multiple
// of mlaTile).
const gqaTile = 128

var _ [0]struct{} = [mlaTile % gqaTile]struct{}{} // gqaTile divides mlaTile: checked at compile time

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
// at most gqaTile cached keys (a tile never straddles a cache page), one
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
	for k0 := 0; k0 < end; k0 += gqaTile {
		kn := min(gqaTile, end-k0)
		s := a.Cache.tile(k0, kn)
		p := params{}.u(a.N, a.H, a.HKV, a.D, a.Pos0).f(a.Scale).
			u(a.Q.Off, a.O.Off, a.Cache.Width, k0-s.local, k0, kn, b2i(k0+kn >= end), 0)
		if err := d.dispatch(k, p, []*Buffer{a.Q.Buf, s.page, a.O.Buf, T}, nh); err != nil {
			return err
		}
	}
	return nil
}
