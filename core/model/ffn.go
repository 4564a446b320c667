package model

import "github.com/tessera-llm/tessera/core/ref"

// moe is the sparse MoE block (architecture.md §3.2–3.3): the router on the
// full x selects TopK experts per token (bias for selection only); tokens
// are grouped by expert so each expert's weights are read once per piece;
// with LatentMoE the experts run on z = routed_expert_down_proj(x) and the
// combined result is normalised (routed_expert_norm) and projected back up;
// the shared experts run on the full x, unscaled.
func (b *cpuBackend) moe(w *MoE, act ref.Act, xn, out []float32, T int) {
	c, s, r := b.r.M.Cfg, &b.s, b
	d, E, K := c.HiddenSize, c.NumExperts, c.TopK
	logits := s.logits[:T*E]
	ref.Linear(r.Pool, logits, xn, T, w.Gate)
	router := routerOf(c)
	for e := range s.byExpert {
		s.byExpert[e] = s.byExpert[e][:0]
	}
	for t := 0; t < T; t++ {
		router.Route(s.idx[t*K:(t+1)*K], s.wts[t*K:(t+1)*K], logits[t*E:(t+1)*E], w.EScoreCorrectionBias, s.router)
		for k := 0; k < K; k++ {
			e := s.idx[t*K+k]
			s.byExpert[e] = append(s.byExpert[e], int32(t*K+k))
		}
	}
	wd := c.ExpertWidth()
	z := xn
	if w.RoutedExpertDownProj != nil {
		z = s.lat[:T*wd]
		ref.Linear(r.Pool, z, xn, T, w.RoutedExpertDownProj)
	}
	// The selected experts run whole on one worker each (one parallel
	// region for all of them, split by token count), their outputs kept by
	// slot, then combined in expert id order.
	j := &s.experts
	*j = expertsJob{b: b, act: act, w: w, z: z, K: K, wd: wd, experts: j.experts[:0], start: j.start[:0]}
	slots := 0
	for e, list := range s.byExpert {
		if len(list) > 0 {
			j.experts = append(j.experts, e)
			j.start = append(j.start, slots)
			slots += len(list)
		}
	}
	r.Pool.For(slots, 1, j)
	acc := s.racc[:T*wd]
	clear(acc)
	for i, e := range j.experts {
		for n, tk := range s.byExpert[e] {
			t := int(tk) / K
			ref.Axpy(s.wts[tk], s.slotY[(j.start[i]+n)*wd:(j.start[i]+n+1)*wd], acc[t*wd:(t+1)*wd])
		}
	}
	j.b, j.w, j.z = nil, nil, nil
	if w.RoutedExpertUpProj != nil {
		if w.RoutedExpertNorm != nil {
			ref.RMSNorm(acc, acc, w.RoutedExpertNorm, c.RMSNormEps)
		}
		ref.Linear(r.Pool, out, acc, T, w.RoutedExpertUpProj)
	} else {
		copy(out[:T*d], acc)
	}
	if w.SharedExperts != nil {
		sh := s.tokY[:T*d]
		r.GLURows(r.Pool, w.SharedExperts, act, xn, sh, T, s.h1, s.h2)
		ref.Axpy(1, sh, out[:T*d])
	}
}

// moeDecode is moe for one token with its GEMVs batched (ref.LinearBatch):
// the router and the latent down-projection in one parallel region, the
// selected and shared experts' gate and up projections in a second, their
// down projections in a third — instead of one region per matrix (3 per
// expert), which cost more in synchronisation than the small expert
// matrices take to stream. Results equal moe's: the same row kernels, the
// experts combined in the same (expert id) order.
func (b *cpuBackend) moeDecode(w *MoE, act ref.Act, xn, out []float32) {
	c, s, r := b.r.M.Cfg, &b.s, b
	d, E, K := c.HiddenSize, c.NumExperts, c.TopK
	wd := c.ExpertWidth()
	logits, z := s.logits[:E], xn
	gs := append(s.gemvs[:0], ref.GEMV{W: w.Gate, X: xn, Out: logits})
	if w.RoutedExpertDownProj != nil {
		z = s.lat[:wd]
		gs = append(gs, ref.GEMV{W: w.RoutedExpertDownProj, X: xn, Out: z})
	}
	ref.LinearBatch(r.Pool, gs)
	router := routerOf(c)
	idx, wts := s.idx[:K], s.wts[:K]
	router.Route(idx, wts, logits, w.EScoreCorrectionBias, s.router)
	// slots in expert id order (moe combines experts in that order)
	order := s.order[:K]
	for k := range order {
		order[k] = k
		for i := k; i > 0 && idx[order[i]] < idx[order[i-1]]; i-- {
			order[i], order[i-1] = order[i-1], order[i]
		}
	}
	I := c.MoEIntermediateSize
	gs = gs[:0]
	for k, e := range idx {
		ex := &w.Experts[e]
		gs = append(gs, ref.GEMV{W: ex.GateProj, X: z, Out: s.dh1[k*I : (k+1)*I]},
			ref.GEMV{W: ex.UpProj, X: z, Out: s.dh2[k*I : (k+1)*I]})
	}
	sh := w.SharedExperts
	var shI int
	if sh != nil {
		shI = sh.GateProj.Rows
		gs = append(gs, ref.GEMV{W: sh.GateProj, X: xn, Out: s.dh1[K*I : K*I+shI]},
			ref.GEMV{W: sh.UpProj, X: xn, Out: s.dh2[K*I : K*I+shI]})
	}
	ref.LinearBatch(r.Pool, gs)
	act.GLU(s.dh1[:K*I+shI], s.dh1[:K*I+shI], s.dh2[:K*I+shI])
	gs = gs[:0]
	for k, e := range idx {
		gs = append(gs, ref.GEMV{W: w.Experts[e].DownProj, X: s.dh1[k*I : (k+1)*I], Out: s.dy[k*wd : (k+1)*wd]})
	}
	if sh != nil {
		gs = append(gs, ref.GEMV{W: sh.DownProj, X: s.dh1[K*I : K*I+shI], Out: s.dy[K*wd : K*wd+d]})
	}
	ref.LinearBatch(r.Pool, gs)
	acc := s.racc[:wd]
	clear(acc)
	for _, k := range order {
		ref.Axpy(wts[k], s.dy[k*wd:(k+1)*wd], acc)
	}
	if w.RoutedExpertUpProj != nil {
		if w.RoutedExpertNorm != nil {
			ref.RMSNorm(acc, acc, w.RoutedExpertNorm, c.RMSNormEps)
		}
		ref.Linear(r.Pool, out[:d], acc, 1, w.RoutedExpertUpProj)
	} else {
		copy(out[:d], acc)
	}
	if sh != nil {
		ref.Axpy(1, s.dy[K*wd:K*wd+d], out[:d])
	}
}

// expertsJob runs the selected experts of a prefill piece over the slot
// range [0, T·K) sorted by expert: the worker whose part holds an expert's
// first slot runs that expert — gather its tokens, its GLU on the worker's
// own one-thread pool and scratch — and writes the outputs to slotY by
// slot. The per-(row, token) sums do not depend on the split.
type expertsJob struct {
	b       *cpuBackend
	act     ref.Act
	w       *MoE
	z       []float32 // the experts' input rows [T, wd]
	K, wd   int
	experts []int // experts with tokens, in id order
	start   []int // their first slots
}

func (j *expertsJob) Run(worker, lo, hi int) {
	s := &j.b.s
	ws := &s.workers[worker]
	for i, e := range j.experts {
		if j.start[i] < lo || j.start[i] >= hi {
			continue
		}
		list := s.byExpert[e]
		n, wd := len(list), j.wd
		tx := ws.tx[:n*wd]
		for k, tk := range list {
			t := int(tk) / j.K
			copy(tx[k*wd:(k+1)*wd], j.z[t*wd:(t+1)*wd])
		}
		ty := s.slotY[j.start[i]*wd : (j.start[i]+n)*wd]
		j.b.GLURows(ws.pool, &j.w.Experts[e], j.act, tx, ty, n, ws.h1, ws.h2)
	}
}
