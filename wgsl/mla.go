//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"iter"
)

// Op wrappers of mla.wgsl.

// mlaTile is the number of keys one MLA workgroup handles (the size of the
// kernels' workgroup score array).
const mlaTile = 128

// MaxCachePageBytes is the largest latent-cache page: the WebGPU default
// maxStorageBufferBindingSize (128 MiB), so every page binds whole on any
// device.
const MaxCachePageBytes = 128 << 20

// LatentCache is one MLA layer's latent KV cache on the GPU: Cap rows of
// Width floats ([c_kv; k_r]), the first Len filled, paged across buffers so
// no binding caps the context. Page i holds rows [i·PageRows, (i+1)·PageRows)
// (the last page only up to Cap, so the pages take exactly Cap rows); PageRows is a
// multiple of mlaTile, so every 128-key tile or split the attention
// kernels read lies in one page. All pages are allocated at creation (for
// the longest context).
type LatentCache struct {
	Pages           []*Buffer
	PageRows        int
	Width, Cap, Len int
}

// DefaultPageRows is the page size NewLatentCache uses for rows of width
// floats and capacity rows: one page when it fits MaxCachePageBytes, else
// the most whole mlaTile tiles that do (the page size is a multiple of
// mlaTile either way).
func DefaultPageRows(width, capacity int) int {
	maxRows := MaxCachePageBytes / (4 * width) / mlaTile * mlaTile
	return max(mlaTile, min(maxRows, (capacity+mlaTile-1)/mlaTile*mlaTile))
}

// NewLatentCache allocates a cache of capacity rows of width floats in
// pages of DefaultPageRows rows.
func (d *Device) NewLatentCache(width, capacity int) (*LatentCache, error) {
	if width <= 0 {
		return nil, fmt.Errorf("wgsl: NewLatentCache(%d, %d)", width, capacity)
	}
	return d.NewPagedLatentCache(width, capacity, DefaultPageRows(width, capacity))
}

// NewPagedLatentCache is NewLatentCache with pages of pageRows rows (a
// positive multiple of 128 whose page fits MaxCachePageBytes); small
// pages let tests cross page edges with short contexts.
func (d *Device) NewPagedLatentCache(width, capacity, pageRows int) (*LatentCache, error) {
	if width <= 0 || capacity <= 0 || pageRows <= 0 || pageRows%mlaTile != 0 || int64(pageRows)*int64(width)*4 > MaxCachePageBytes {
		return nil, fmt.Errorf("wgsl: NewPagedLatentCache(width %d, capacity %d, page rows %d): want positive sizes, page rows a multiple of %d, pages ≤ %d MiB",
			width, capacity, pageRows, mlaTile, MaxCachePageBytes>>20)
	}
	c := &LatentCache{PageRows: pageRows, Width: width, Cap: capacity}
	for r0 := 0; r0 < capacity; r0 += pageRows {
		rows := min(pageRows, capacity-r0)
		b, err := d.NewBuffer(width * rows)
		if err != nil {
			c.Release()
			return nil, fmt.Errorf("wgsl: latent cache page %d (%d rows of %d floats): %w", len(c.Pages), rows, width, err)
		}
		c.Pages = append(c.Pages, b)
	}
	return c, nil
}

// Bytes is the GPU memory the cache's pages take.
func (c *LatentCache) Bytes() int64 {
	var n int64
	for _, b := range c.Pages {
		n += 4 * int64(b.Words())
	}
	return n
}

// cacheSpan is a run of rows that lies in one page.
type cacheSpan struct {
	page       *Buffer
	row, local int // first row: in the cache, in the page
	n          int
}

// tile is the span of the n rows from row0, which lie in one page (a
// 128-key tile never crosses a page edge).
func (c *LatentCache) tile(row0, n int) cacheSpan {
	pi, local := row0/c.PageRows, row0%c.PageRows
	return cacheSpan{page: c.Pages[pi], row: row0, local: local, n: min(n, c.PageRows-local)}
}

// spans splits rows [row0, row0+n) at page edges (an iterator: nothing
// allocated).
func (c *LatentCache) spans(row0, n int) iter.Seq[cacheSpan] {
	return func(yield func(cacheSpan) bool) {
		for n > 0 {
			s := c.tile(row0, n)
			if !yield(s) {
				return
			}
			row0, n = row0+s.n, n-s.n
		}
	}
}

// AppendHost uploads rows (a multiple of Width floats) to the end of the cache.
func (c *LatentCache) AppendHost(rows []float32) error {
	if len(rows)%c.Width != 0 {
		return fmt.Errorf("wgsl: LatentCache.AppendHost of %d floats, width %d", len(rows), c.Width)
	}
	n := len(rows) / c.Width
	if c.Len+n > c.Cap {
		return fmt.Errorf("wgsl: latent cache full (%d + %d > %d)", c.Len, n, c.Cap)
	}
	for s := range c.spans(c.Len, n) {
		o := (s.row - c.Len) * c.Width
		if err := s.page.WriteF32(s.local*c.Width, rows[o:o+s.n*c.Width]); err != nil {
			return fmt.Errorf("wgsl: latent cache rows %d..%d: %w", s.row, s.row+s.n, err)
		}
	}
	c.Len += n
	return nil
}

// Append records a GPU copy of n rows from src (row stride srcStride) to
// the end of the cache; nothing goes through the host.
func (d *Device) Append(c *LatentCache, src View, srcStride, n int) error {
	if c.Len+n > c.Cap {
		return fmt.Errorf("wgsl: latent cache full (%d + %d > %d)", c.Len, n, c.Cap)
	}
	for s := range c.spans(c.Len, n) {
		from := View{Buf: src.Buf, Off: src.Off + (s.row-c.Len)*srcStride}
		if err := d.Copy(s.page.At(s.local*c.Width).Rows(c.Width), from.Rows(srcStride), s.n, c.Width); err != nil {
			return err
		}
	}
	c.Len += n
	return nil
}

// Release frees the cache's pages.
func (c *LatentCache) Release() {
	for _, b := range c.Pages {
		b.Release()
	}
	c.Pages = nil
}

// MLAArgs are the GPU operands of MLA (ref.MLAArgs): Q [N, H·(DN+DR)],
// WKVB kv_b_proj [H·(DN+DV), RKV], Cache rows [c_kv (RKV); k_r (DR)] (query
// i attends to rows ≤ Pos0+i, which must be cached), O [N, H·DV].
type MLAArgs struct {
	N, H, DN, DR, DV, RKV int
	Pos0                  int
	Scale                 float32
	Q                     View
	WKVB                  *Mat
	Cache                 *LatentCache
	O                     View
	// New, if its Buf is set (MLAAbsorbed only), are the queries' own
	// rows [c_kv; k_r] (N rows, c_kv not yet normed), appended to Cache
	// by the attention's first kernel with c_kv RMSNormed (weight Norm,
	// Eps): Pos0 is then Cache.Len before the call, and the call adds N.
	New  Strided
	Norm View
	Eps  float32
}

func (a *MLAArgs) check(what string) error {
	if a == nil || a.N <= 0 || a.H <= 0 || a.DN <= 0 || a.DR < 0 || a.DV <= 0 || a.RKV <= 0 || a.Pos0 < 0 {
		if a == nil {
			return fmt.Errorf("wgsl: %s: no arguments", what)
		}
		// the sizes one by one: passing a itself would move every call's
		// arguments to the heap
		return fmt.Errorf("wgsl: %s: bad sizes N=%d H=%d DN=%d DR=%d DV=%d RKV=%d Pos0=%d", what, a.N, a.H, a.DN, a.DR, a.DV, a.RKV, a.Pos0)
	}
	if a.Cache == nil || a.Cache.Width < a.RKV+a.DR {
		return fmt.Errorf("wgsl: %s: cache missing or narrower than RKV+DR", what)
	}
	if a.New.Buf != nil {
		if a.Pos0 != a.Cache.Len || a.Pos0+a.N > a.Cache.Cap {
			return fmt.Errorf("wgsl: %s: appending %d rows at position %d to a cache of %d of %d rows", what, a.N, a.Pos0, a.Cache.Len, a.Cache.Cap)
		}
		if err := a.New.check(a.N, a.RKV+a.DR, what, "New"); err != nil {
			return err
		}
		if err := a.Norm.check(a.RKV, what, "Norm"); err != nil {
			return err
		}
	} else if a.Pos0+a.N > a.Cache.Len {
		return fmt.Errorf("wgsl: %s: queries up to position %d but only %d cached rows", what, a.Pos0+a.N-1, a.Cache.Len)
	}
	if err := a.WKVB.check(what, "WKVB"); err != nil {
		return err
	}
	if a.WKVB.Rows != a.H*(a.DN+a.DV) || a.WKVB.Cols != a.RKV {
		return fmt.Errorf("wgsl: %s: WKVB is %dx%d, want %dx%d", what, a.WKVB.Rows, a.WKVB.Cols, a.H*(a.DN+a.DV), a.RKV)
	}
	if err := a.Q.check(a.N*a.H*(a.DN+a.DR), what, "Q"); err != nil {
		return err
	}
	if err := a.O.check(a.N*a.H*a.DV, what, "O"); err != nil {
		return err
	}
	if a.DN > loopBudget/2 || a.RKV > loopBudget/4 || a.DR > loopBudget/4 {
		return fmt.Errorf("wgsl: %s: head dims exceed the per-invocation loop budget", what)
	}
	return nil
}

// mlaParams is mla.wgsl's uniform block up to o_off (a.WKVB may be nil:
// a plain append).
func mlaParams(a *MLAArgs) params {
	var dt, wOff, wStride int
	if a.WKVB != nil {
		dt, wOff, wStride = int(a.WKVB.DType), a.WKVB.Off, a.WKVB.Stride
	}
	return params{}.u(a.N, a.H, a.DN, a.DR, a.DV, a.RKV, a.Pos0).f(a.Scale).
		u(dt, wOff, wStride, a.Q.Off, 0, a.Cache.Width, a.O.Off)
}

// mlaWG is mla.wgsl's workgroup size (common.wgsl's WG).
const mlaWG = 64

// mlaMergeBudget is the loop iterations an absorb_out invocation may spend
// merging the splits' partials itself (a variable for tests); past it a
// separate absorb_combine dispatch merges them.
var mlaMergeBudget = loopBudget

// mlaMerges reports whether absorb_out merges nsplit partials of rkv
// values itself: its invocations' loops (the maxima, the merge of
// ⌈rkv/WG⌉ values, ⌈dv/WG⌉ rows of W_UV) stay within mlaMergeBudget.
func mlaMerges(nsplit, rkv, dv int) bool {
	return (nsplit+mlaWG-1)/mlaWG+(rkv+mlaWG-1)/mlaWG*nsplit+(dv+mlaWG-1)/mlaWG*rkv <= mlaMergeBudget
}

// appendNormed records absorb_prep with k: nq workgroups of q̃ (from q and
// w into t; p: the parameters up to st_off) and the rows of span s of
// cache c appended from src (the span's first row, rows stride words
// apart), c_kv RMSNormed with nu and eps.
func (d *Device) appendNormed(k *kernel, p params, nq int, c *LatentCache, s cacheSpan, src View, stride int, nu View, eps float32, q, w, t *Buffer) error {
	p = p.u(0, 0, 0).u(src.Off, stride, nu.Off).f(eps).u(nq, s.n, 0, 0, s.local*c.Width)
	return d.dispatch(k, p, []*Buffer{q, w, s.page, nil, t, src.Buf, nu.Buf}, nq+s.n)
}

// AppendNormed records the append of n rows of src [c_kv (rkv); k_r] to
// the end of the cache with c_kv RMSNormed (weight nu, eps; ref.RMSNorm):
// one dispatch per cache page the rows reach, nothing through the host.
func (d *Device) AppendNormed(c *LatentCache, src Strided, n, rkv int, nu View, eps float32) error {
	if n <= 0 || rkv <= 0 || rkv > c.Width {
		return fmt.Errorf("wgsl: AppendNormed: %d rows, %d of %d values normed", n, rkv, c.Width)
	}
	if c.Len+n > c.Cap {
		return fmt.Errorf("wgsl: latent cache full (%d + %d > %d)", c.Len, n, c.Cap)
	}
	if err := src.check(n, c.Width, "AppendNormed", "src"); err != nil {
		return err
	}
	if err := nu.check(rkv, "AppendNormed", "norm weight"); err != nil {
		return err
	}
	k, err := d.kernel("mla.wgsl", "absorb_prep", 7)
	if err != nil {
		return err
	}
	p := mlaParams(&MLAArgs{RKV: rkv, DR: c.Width - rkv, Cache: c}).u(0, 0, 0, 0, 0, 0, 0, 0, 0)
	for s := range c.spans(c.Len, n) {
		from := View{src.Buf, src.Off + (s.row-c.Len)*src.Stride}
		if err := d.appendNormed(k, p, 0, c, s, from, src.Stride, nu, eps, nil, nil, nil); err != nil {
			return err
		}
	}
	c.Len += n
	return nil
}

// MLAAbsorbed records weight-absorbed MLA over the latent cache (the decode
// form, ref.MLAAbsorbed): keys are split into workgroups of 128 whose
// partial softmax states are merged, so no invocation's loop grows with the
// context. With a.New it first appends the queries' own rows (in the
// kernel that computes q̃ = W_UKᵀ q_nope). The splits are dispatched page
// by page (one absorb_attn dispatch per cache page holding visible keys,
// each binding only its page); absorb_out merges them unless the context
// is so long that a separate absorb_combine must, and a context of one
// split needs no merge (absorb_attn writes the output). A decoded token
// with its append takes 2 dispatches up to 128 keys, then 3 on a one-page
// cache. Scratch lives in a device-owned buffer that grows to the largest
// context seen.
func (d *Device) MLAAbsorbed(a *MLAArgs) error {
	if err := a.check("MLAAbsorbed"); err != nil {
		return err
	}
	nh := a.N * a.H
	end := a.Pos0 + a.N
	nsplit := (end + mlaTile - 1) / mlaTile
	qtWords := nh * a.RKV
	partWords := nh * nsplit * (a.RKV + 2)
	T, err := d.scratchBuf("mla", qtWords+partWords)
	if err != nil {
		return err
	}
	prep, err := d.weightKernel("mla.wgsl", "absorb_prep", 7, a.WKVB.DType)
	if err != nil {
		return err
	}
	var ks [3]*kernel
	for i, e := range []string{"absorb_attn", "absorb_combine", "absorb_out"} {
		if ks[i], err = d.weightKernel("mla.wgsl", e, 5, a.WKVB.DType); err != nil {
			return err
		}
	}
	base := mlaParams(a).u(0, qtWords, nsplit, mlaTile, 0, 0, 0, 0, 0)
	nq := (qtWords + mlaWG - 1) / mlaWG
	// q̃, and the rows appended: those in the first page they reach by the
	// same dispatch, any in a later page by one more each
	if c := a.Cache; a.New.Buf != nil {
		for s := range c.spans(c.Len, a.N) {
			from := View{a.New.Buf, a.New.Off + (s.row-c.Len)*a.New.Stride}
			if err := d.appendNormed(prep, base, nq, c, s, from, a.New.Stride, a.Norm, a.Eps, a.Q.Buf, a.WKVB.Buf, T); err != nil {
				return err
			}
			nq = 0
		}
		c.Len += a.N
	} else if err := d.appendNormed(prep, base, nq, c, cacheSpan{page: c.Pages[0]}, View{}, 0, View{}, 0, a.Q.Buf, a.WKVB.Buf, T); err != nil {
		return err
	}
	single := nsplit == 1 // absorb_attn has the final õ: it writes o
	for s := range a.Cache.spans(0, end) {
		sp0, nsp := s.row/mlaTile, (s.n+mlaTile-1)/mlaTile
		p := base.u(s.row, sp0, nsp, 0, 0, 0, 0, 0, 0, 0, b2i(single))
		if err := d.dispatch(ks[0], p, []*Buffer{a.Q.Buf, a.WKVB.Buf, s.page, a.O.Buf, T}, nh*nsp); err != nil {
			return err
		}
	}
	if single {
		return nil
	}
	page0 := []*Buffer{a.Q.Buf, a.WKVB.Buf, a.Cache.Pages[0], a.O.Buf, T}
	merge := mlaMerges(nsplit, a.RKV, a.DV)
	if !merge {
		if err := d.dispatch(ks[1], base.u(0, 0, 0), page0, (qtWords+mlaWG-1)/mlaWG); err != nil {
			return err
		}
	}
	p := base.u(0, 0, 0, 0, 0, 0, 0, 0, 0, b2i(merge), 0)
	return d.dispatch(ks[2], p, page0, nh)
}

// MLANaive records the expanded ("MHA mode") MLA used for prefill
// (ref.MLANaive): per tile of 128 cached keys (a tile never straddles a
// cache page), Linear expands the tile to per-head [k_nope; v], then one
// workgroup per (query, head) folds it into an online softmax. Memory is
// O(tile + N·H) whatever the context length.
func (d *Device) MLANaive(a *MLAArgs) error {
	if err := a.check("MLANaive"); err != nil {
		return err
	}
	nh := a.N * a.H
	rows := a.H * (a.DN + a.DV)
	kvWords := mlaTile * rows
	T, err := d.scratchBuf("mla", kvWords+2*nh)
	if err != nil {
		return err
	}
	k, err := d.kernel("mla.wgsl", "naive_attn", 5)
	if err != nil {
		return err
	}
	end := a.Pos0 + a.N
	for k0 := 0; k0 < end; k0 += mlaTile {
		kn := min(mlaTile, end-k0)
		s := a.Cache.tile(k0, kn)
		if err := d.LinearStrided(T.At(0), rows, s.page.At(s.local*a.Cache.Width), a.Cache.Width, kn, a.WKVB); err != nil {
			return err
		}
		p := mlaParams(a).u(0, 0, 0, mlaTile, k0, kn, b2i(k0+kn >= end), 0, kvWords).u(k0-s.local, 0, 0)
		if err := d.dispatch(k, p, []*Buffer{a.Q.Buf, a.WKVB.Buf, s.page, a.O.Buf, T}, nh); err != nil {
			return err
		}
	}
	return nil
}
