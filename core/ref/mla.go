package ref

import (
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/tensor"
)

// LatentCache is one MLA layer's latent KV cache: per token the
// kv_a_layernorm-ed c_kv (kv_lora_rank values) followed by the k_rope slice
// (qk_rope_head_dim values, never rotated in NoPE models). It grows in
// fixed-size pages, so appending never copies what is already cached.
type LatentCache struct {
	width, pageSize int
	pages           [][]float32
	n               int
}

// NewLatentCache returns an empty cache of rows of width floats, growing by
// pages of pageSize rows.
func NewLatentCache(width, pageSize int) *LatentCache {
	if pageSize < 1 {
		pageSize = 256
	}
	return &LatentCache{width: width, pageSize: pageSize}
}

// Len is the number of cached tokens.
func (c *LatentCache) Len() int { return c.n }

// Width is the number of floats per token.
func (c *LatentCache) Width() int { return c.width }

// Bytes is the memory held by the allocated pages.
func (c *LatentCache) Bytes() int64 { return int64(len(c.pages)) * int64(c.pageSize*c.width) * 4 }

// Reserve allocates pages so that n tokens fit without further allocation.
func (c *LatentCache) Reserve(n int) {
	for len(c.pages)*c.pageSize < n {
		c.pages = append(c.pages, make([]float32, c.pageSize*c.width))
	}
}

// Append copies rows (a multiple of Width floats) to the end of the cache.
func (c *LatentCache) Append(rows []float32) {
	if len(rows)%c.width != 0 {
		panic(fmt.Sprintf("ref: LatentCache.Append of %d floats, width %d", len(rows), c.width))
	}
	m := len(rows) / c.width
	c.Reserve(c.n + m)
	for i := 0; i < m; i++ {
		copy(c.Row(c.n+i), rows[i*c.width:(i+1)*c.width])
	}
	c.n += m
}

// Row returns token s's row (s < Len after the Append that wrote it).
func (c *LatentCache) Row(s int) []float32 {
	p, o := s/c.pageSize, (s%c.pageSize)*c.width
	return c.pages[p][o : o+c.width]
}

// Truncate drops tokens from position n on (pages are kept for reuse).
func (c *LatentCache) Truncate(n int) {
	if n < c.n {
		c.n = n
	}
}

// Clone returns a deep copy holding the same tokens.
func (c *LatentCache) Clone() *LatentCache {
	d := NewLatentCache(c.width, c.pageSize)
	d.Reserve(c.n)
	for i := 0; i*c.pageSize < c.n; i++ {
		copy(d.pages[i], c.pages[i])
	}
	d.n = c.n
	return d
}

// MLAArgs describes multi-head latent attention for N queries over a latent
// cache (NoPE: nothing is rotated).
//
//	Q     [N, H·(DN+DR)]   per head [q_nope (DN); q_rope (DR)]
//	WKVB  kv_b_proj, [H·(DN+DV), RKV]; per head rows [W_UK (DN); W_UV (DV)]
//	Cache rows [c_kv (RKV); k_r (DR)]; query i (absolute position Pos0+i)
//	      attends to cache rows s ≤ Pos0+i
//	O     [N, H·DV]
type MLAArgs struct {
	N, H, DN, DR, DV, RKV int
	Pos0                  int
	Scale                 float32
	Q                     []float32
	WKVB                  *tensor.Mat
	Cache                 *LatentCache
	O                     []float32
}

// MLAScratch is reusable working memory for MLA; the zero value is ready
// and grows on first use.
type MLAScratch struct {
	tile  []float32 // naive: expanded [k_nope; v] per head for a tile of keys
	ckv   []float32 // naive: the tile's latent rows, contiguous
	stats []float32 // naive: running max and sum per (query, head)
}

const mlaKeyTile = 128

// MLANaive is the "MHA mode" of MLA used for prefill: keys and values are
// expanded from the latent per head,
//
//	k_h(s) = [W_UK_h c_kv(s) ; k_r(s)],   v_h(s) = W_UV_h c_kv(s)
//	o_h(t) = Σ_{s≤t} softmax_s( scale · q_h(t)·k_h(s) ) v_h(s)
//
// processed in tiles of keys with an online softmax, so memory is
// O(tile + N·H) whatever the context length.
func MLANaive(p *Pool, a *MLAArgs, s *MLAScratch) {
	p = poolOr(p)
	H, dn, dv, rkv := a.H, a.DN, a.DV, a.RKV
	end := a.Pos0 + a.N
	rows := H * (dn + dv)
	s.tile = grow(s.tile, mlaKeyTile*rows)
	s.ckv = grow(s.ckv, mlaKeyTile*rkv)
	s.stats = grow(s.stats, 2*a.N*H)
	for i := 0; i < a.N*H; i++ {
		s.stats[2*i] = float32(math.Inf(-1))
		s.stats[2*i+1] = 0
	}
	clear(a.O[:a.N*H*dv])
	j := &p.attn
	for k0 := 0; k0 < end; k0 += mlaKeyTile {
		kn := min(mlaKeyTile, end-k0)
		for i := 0; i < kn; i++ {
			copy(s.ckv[i*rkv:(i+1)*rkv], a.Cache.Row(k0 + i)[:rkv])
		}
		Linear(p, s.tile, s.ckv, kn, a.WKVB)
		*j = attnJob{a: *a, s: s, k0: k0, kn: kn}
		p.For(a.N*H, 1, j)
	}
	*j = attnJob{}
	for i := 0; i < a.N*H; i++ {
		inv := 1 / s.stats[2*i+1]
		o := a.O[i*dv : (i+1)*dv]
		for x := range o {
			o[x] *= inv
		}
	}
}

type attnJob struct {
	a      MLAArgs
	s      *MLAScratch
	k0, kn int
	// absorbed mode
	absorbed bool
	buf      [][]float32
}

func (j *attnJob) Run(w, lo, hi int) {
	if j.absorbed {
		for i := lo; i < hi; i++ {
			mlaAbsorbedOne(&j.a, i/j.a.H, i%j.a.H, j.buf[w])
		}
		return
	}
	a := &j.a
	H, dn, dr, dv, rkv := a.H, a.DN, a.DR, a.DV, a.RKV
	dqk := dn + dr
	rows := H * (dn + dv)
	for i := lo; i < hi; i++ {
		t, h := i/H, i%H
		last := a.Pos0 + t // last visible key
		if j.k0 > last {
			continue
		}
		q := a.Q[t*H*dqk+h*dqk:][:dqk]
		o := a.O[t*H*dv+h*dv:][:dv]
		m, l := j.s.stats[2*i], j.s.stats[2*i+1]
		for k := 0; k < j.kn && j.k0+k <= last; k++ {
			kv := j.s.tile[k*rows+h*(dn+dv):][:dn+dv]
			sc := Dot(q[:dn], kv[:dn]) + Dot(q[dn:], a.Cache.Row(j.k0 + k)[rkv:rkv+dr])
			sc *= a.Scale
			if sc > m {
				r := float32(math.Exp(float64(m - sc)))
				l *= r
				for x := range o {
					o[x] *= r
				}
				m = sc
			}
			pr := float32(math.Exp(float64(sc - m)))
			l += pr
			Axpy(pr, kv[dn:], o)
		}
		j.s.stats[2*i], j.s.stats[2*i+1] = m, l
	}
}

// MLAAbsorbed is the weight-absorbed ("MQA mode") form used for decode: it
// attends in the latent space and never expands the cache,
//
//	q̃_h = W_UK_hᵀ q_nope,h                                  ∈ R^{RKV}
//	score(s) = scale · ( q̃_h·c_kv(s) + q_rope,h·k_r(s) )
//	õ_h = Σ_s softmax_s(score) c_kv(s);   o_h = W_UV_h õ_h
//
// It equals MLANaive up to float rounding. Query-head pairs run in
// parallel; each keeps an online softmax, so no buffer grows with context.
func MLAAbsorbed(p *Pool, a *MLAArgs, s *MLAScratch) {
	p = poolOr(p)
	j := &p.attn
	need := 3 * max(a.RKV, a.DN+a.DV)
	if len(j.buf) != p.n || len(j.buf[0]) < need {
		j.buf = make([][]float32, p.n)
		for i := range j.buf {
			j.buf[i] = make([]float32, need)
		}
	}
	buf := j.buf
	*j = attnJob{a: *a, s: s, absorbed: true, buf: buf}
	p.For(a.N*a.H, 1, j)
	*j = attnJob{buf: buf}
}

func mlaAbsorbedOne(a *MLAArgs, t, h int, buf []float32) {
	dn, dr, dv, rkv := a.DN, a.DR, a.DV, a.RKV
	dqk := dn + dr
	qt, ot, row := buf[:rkv], buf[rkv:2*rkv], buf[2*rkv:]
	q := a.Q[t*a.H*dqk+h*dqk:][:dqk]
	base := h * (dn + dv)
	clear(qt)
	for i := 0; i < dn; i++ {
		Axpy(q[i], a.WKVB.Row(base+i, row), qt)
	}
	clear(ot)
	m, l := float32(math.Inf(-1)), float32(0)
	last := a.Pos0 + t
	for s := 0; s <= last; s++ {
		c := a.Cache.Row(s)
		sc := (Dot(qt, c[:rkv]) + Dot(q[dn:], c[rkv:rkv+dr])) * a.Scale
		if sc > m {
			r := float32(math.Exp(float64(m - sc)))
			l *= r
			for x := range ot {
				ot[x] *= r
			}
			m = sc
		}
		pr := float32(math.Exp(float64(sc - m)))
		l += pr
		Axpy(pr, c[:rkv], ot)
	}
	o := a.O[t*a.H*dv+h*dv:][:dv]
	inv := 1 / l
	for j := 0; j < dv; j++ {
		o[j] = Dot(a.WKVB.Row(base+dn+j, row), ot) * inv
	}
}

// grow returns b with length ≥ n, reallocating only when too short.
func grow[E any](b []E, n int) []E {
	if cap(b) >= n {
		return b[:n]
	}
	return make([]E, n)
}
