package ref

import "math"

// GQAArgs describes causal grouped-query softmax attention of N queries over
// a KV cache.
//
//	Q      [N, H·D]             query i is at absolute position Pos0+i
//	Cache  rows [k (HKV·D); v (HKV·D)], one per position; query i attends
//	       to rows s ≤ Pos0+i
//	O      [N, H·D]
//
// Query head h reads KV head h / (H/HKV) (repeat_kv).
type GQAArgs struct {
	N, H, HKV, D int
	Pos0         int
	Scale        float32
	Q            []float32
	Cache        *LatentCache
	O            []float32
}

// GQA computes, per query t and head h with g = h / (H/HKV),
//
//	o_h(t) = Σ_{s ≤ Pos0+t} softmax_s( Scale · q_h(t)·k_g(s) ) v_g(s)
//
// with an online softmax (no buffer grows with the context). Query-head
// pairs run in parallel on p.
func GQA(p *Pool, a *GQAArgs) {
	p = poolOr(p)
	j := &p.gqa
	j.a = *a
	p.For(a.N*a.H, 1, j)
	j.a = GQAArgs{}
}

type gqaJob struct{ a GQAArgs }

func (j *gqaJob) Run(_, lo, hi int) {
	a := &j.a
	D, rep := a.D, a.H/a.HKV
	kw := a.HKV * D
	for i := lo; i < hi; i++ {
		t, h := i/a.H, i%a.H
		g := h / rep
		q := a.Q[(t*a.H+h)*D:][:D]
		o := a.O[(t*a.H+h)*D:][:D]
		clear(o)
		m, l := float32(math.Inf(-1)), float32(0)
		for s := 0; s <= a.Pos0+t; s++ {
			row := a.Cache.Row(s)
			sc := Dot(q, row[g*D:(g+1)*D]) * a.Scale
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
			Axpy(pr, row[kw+g*D:kw+(g+1)*D], o)
		}
		inv := 1 / l
		for x := range o {
			o[x] *= inv
		}
	}
}
