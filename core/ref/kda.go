package ref

import "math"

// KDAGate computes the per-channel log-decay g ∈ R^{H·dk} of one or more
// tokens (raw and g are [T, H·dk]) from the low-rank gate projection
// raw = f_b_proj(f_a_proj(x)):
//
//	K3 (bounded, lb = gate_lower_bound < 0):
//	    g = lb · σ( exp(A_log[h]) · (raw + dt_bias) )        ∈ (lb, 0)
//	Kimi Linear (softplus):
//	    g = −exp(A_log[h]) · softplus(raw + dt_bias)         ∈ (−∞, 0)
//
// A_log holds H values (one per head, broadcast over dk) or H·dk values
// (one per channel); dt_bias holds H·dk values. g may alias raw.
func KDAGate(g, raw, dtBias, aLog []float32, H, dk int, bounded bool, lowerBound float32) {
	hd := H * dk
	perChannel := len(aLog) == hd
	if bounded {
		kdaGateBounded(g, raw, dtBias, aLog, hd, dk, perChannel, lowerBound)
		return
	}
	for i := range raw {
		c := i % hd
		al := aLog[c/dk]
		if perChannel {
			al = aLog[c]
		}
		a := math.Exp(float64(al))
		x := raw[i] + dtBias[c]
		if bounded {
			g[i] = lowerBound * Sigmoid(float32(a*float64(x)))
		} else {
			g[i] = float32(-a) * Softplus(x)
		}
	}
}

// kdaGateBounded is KDAGate's lower-bounded form, the sigmoids a chunk at
// a time through the slice kernel.
func kdaGateBounded(g, raw, dtBias, aLog []float32, hd, dk int, perChannel bool, lowerBound float32) {
	var buf [64]float32
	for i0 := 0; i0 < len(raw); i0 += len(buf) {
		n := min(len(buf), len(raw)-i0)
		for j := range n {
			c := (i0 + j) % hd
			al := aLog[c/dk]
			if perChannel {
				al = aLog[c]
			}
			buf[j] = float32(math.Exp(float64(al)) * float64(raw[i0+j]+dtBias[c]))
		}
		sigmoidVec(buf[:n], buf[:n])
		for j := range n {
			g[i0+j] = lowerBound * buf[j]
		}
	}
}

// KDAArgs describes one KDA recurrence over T tokens and H heads.
// Layouts (row-major, one row per token):
//
//	Q, K  [T, H·DK]  queries and keys, already L2-normalised (Q also × DK^-1/2)
//	V     [T, H·DV]
//	G     [T, H·DK]  log-decays (≤ 0)
//	Beta  [T, H]     write strengths β ∈ (0,1)
//	O     [T, H·DV]  output
//	S     [H, DK, DV] recurrent state, read and updated in place
type KDAArgs struct {
	T, H, DK, DV        int
	Q, K, V, G, Beta, O []float32
	S                   []float32
}

// KDARecurrent runs the delta rule with per-channel decay token by token
// (decode form; Kimi Linear, arXiv:2510.26692). Per head, with S ∈ R^{dk×dv}:
//
//	S  ← Diag(exp(g_t)) S          row d of S times exp(g_t[d])
//	u  = β_t (v_t − Sᵀ k_t)          prediction error
//	S  ← S + k_t uᵀ                  rank-1 write
//	o_t = Sᵀ q_t                     read with the updated state
//
// Heads run in parallel on p.
func KDARecurrent(p *Pool, a *KDAArgs) {
	p = poolOr(p)
	j := &p.kda
	j.a, j.chunk = *a, 0
	j.ensureScratch(p.n, a.DK)
	p.For(a.H, 1, j)
	j.a = KDAArgs{}
}

// ensureScratch gives each of n workers at least need floats, allocating
// only when they grow.
func (j *kdaJob) ensureScratch(n, need int) {
	if len(j.scratch) != n || len(j.scratch[0]) < need {
		j.scratch = make([][]float32, n)
		for i := range j.scratch {
			j.scratch[i] = make([]float32, need)
		}
	}
}

// KDAChunked computes exactly what KDARecurrent computes, chunk by chunk
// (the WY / UT-transform form used for prefill; arXiv:2406.06484 with
// per-channel decay as in fla naive_chunk_kda). For a chunk of n ≤ C rows
// with incoming state S:
//
//	G_i[d]  = Σ_{m≤i} g_m[d]                                  (inclusive)
//	L_ij    = β_i Σ_d K_i[d] K_j[d] exp(G_i[d] − G_j[d])       j < i
//	U       = (I+L)^{-1} (β ⊙ V),   W = (I+L)^{-1} (β ⊙ exp(G) ⊙ K)
//	Vnew    = U − W S
//	O_i     = (exp(G_i) ⊙ Q_i) S + Σ_{j≤i} (Σ_d Q_i[d] K_j[d] exp(G_i[d]−G_j[d])) Vnew_j
//	S_out   = Diag(exp(G_{n−1})) S + Σ_j (exp(G_{n−1} − G_j) ⊙ K_j) Vnew_jᵀ
//
// (I+L)^{-1} is applied by forward substitution. Decays enter only as
// exp(G_i − G_j) ≤ 1 (j ≤ i), formed as running products of the per-step
// factors exp(g_m) ≤ 1, never exp(−G), so nothing overflows however
// negative g is, and a chunk costs n·dk exponentials rather than n²·dk. The last chunk may be partial; no
// padding is needed. Heads run in parallel on p.
func KDAChunked(p *Pool, a *KDAArgs, C int) {
	if C < 1 {
		C = 64
	}
	p = poolOr(p)
	j := &p.kda
	j.a, j.chunk = *a, C
	need := C*a.DK*3 + C*C*2 + C*a.DV*2 + a.DK + max(C, a.DK)
	j.ensureScratch(p.n, need)
	p.For(a.H, 1, j)
	j.a = KDAArgs{}
}

type kdaJob struct {
	a       KDAArgs
	chunk   int
	scratch [][]float32
}

func (j *kdaJob) Run(w, lo, hi int) {
	for h := lo; h < hi; h++ {
		if j.chunk == 0 {
			kdaRecurrentHead(&j.a, h, j.scratch[w][:j.a.DK])
		} else {
			kdaChunkedHead(&j.a, h, j.chunk, j.scratch[w])
		}
	}
}

func kdaRecurrentHead(a *KDAArgs, h int, e []float32) {
	dk, dv := a.DK, a.DV
	S := a.S[h*dk*dv : (h+1)*dk*dv]
	for t := 0; t < a.T; t++ {
		kq := t*a.H*dk + h*dk
		q, k, g := a.Q[kq:kq+dk], a.K[kq:kq+dk], a.G[kq:kq+dk]
		ov := t*a.H*dv + h*dv
		v, o := a.V[ov:ov+dv], a.O[ov:ov+dv]
		expVec(e, g)
		kdaStep(S, k, q, e, v, o, a.Beta[t*a.H+h])
	}
}

// kdaStepGeneric is one token of kdaRecurrentHead: with the per-channel
// decays e = exp(g),
//
//	S ← Diag(e) S;  o ← β(v − Sᵀk);  S ← S + k oᵀ;  o ← Sᵀq
func kdaStepGeneric(S, k, q, e, v, o []float32, beta float32) {
	dk, dv := len(k), len(v)
	clear(o)
	for d := 0; d < dk; d++ { // decay, then o = Sᵀk (prediction)
		row := S[d*dv : (d+1)*dv]
		for i := range row {
			row[i] *= e[d]
		}
		Axpy(k[d], row, o)
	}
	for i := range o { // u = β(v − Sᵀk)
		o[i] = beta * (v[i] - o[i])
	}
	for d := 0; d < dk; d++ { // S += k uᵀ
		Axpy(k[d], o, S[d*dv:(d+1)*dv])
	}
	clear(o)
	for d := 0; d < dk; d++ { // o = Sᵀq
		Axpy(q[d], S[d*dv:(d+1)*dv], o)
	}
}

func kdaChunkedHead(a *KDAArgs, h, C int, scratch []float32) {
	dk, dv := a.DK, a.DV
	S := a.S[h*dk*dv : (h+1)*dk*dv]
	E, sc := scratch[:C*dk], scratch[C*dk:] // E_i = exp(G_i), as running products
	W, sc := sc[:C*dk], sc[C*dk:]
	KP, sc := sc[:C*dk], sc[C*dk:] // KP_j = K_j ⊙ exp(G_i − G_j) for the current row i
	L, sc := sc[:C*C], sc[C*C:]
	Aqk, sc := sc[:C*C], sc[C*C:]
	U, sc := sc[:C*dv], sc[C*dv:]
	Vn, sc := sc[:C*dv], sc[C*dv:]
	dec, sc := sc[:dk], sc[dk:] // a_i = exp(g_i)
	coef := sc[:max(C, dk)]     // one row's coefficients for axpyRows
	qRow := func(t int) []float32 { o := t*a.H*dk + h*dk; return a.Q[o : o+dk] }
	kRow := func(t int) []float32 { o := t*a.H*dk + h*dk; return a.K[o : o+dk] }
	for c0 := 0; c0 < a.T; c0 += C {
		n := min(C, a.T-c0)
		// Decays enter only through the per-step factors a_i = exp(g_i) ≤ 1:
		// exp(G_i − G_j) = Π_{j<m≤i} a_m is kept as a running product in
		// KP_j, so the chunk needs n·dk exponentials instead of n²·dk and
		// nothing can overflow (products of factors ≤ 1 only underflow).
		for i := 0; i < n; i++ {
			expVec(dec, a.G[(c0+i)*a.H*dk+h*dk:][:dk])
			Ei := E[i*dk : (i+1)*dk]
			if i == 0 {
				copy(Ei, dec)
			} else {
				mulInto(Ei, E[(i-1)*dk:i*dk], dec)
			}
			mulRows(KP[:i*dk], dec)
			Ki, Qi := kRow(c0+i), qRow(c0+i)
			copy(KP[i*dk:(i+1)*dk], Ki)
			bi := a.Beta[(c0+i)*a.H+h]
			Li := L[i*C : i*C+i+1]
			dotRows(Li, Ki, KP, dk)
			for jj := range Li {
				Li[jj] *= bi
			}
			dotRows(Aqk[i*C:i*C+i+1], Qi, KP, dk)
		}
		// Forward substitution: U_i = β_i V_i − Σ_{j<i} L_ij U_j,
		// W_i = β_i exp(G_i) K_i − Σ_{j<i} L_ij W_j.
		for i := 0; i < n; i++ {
			bi := a.Beta[(c0+i)*a.H+h]
			Ui, Wi := U[i*dv:(i+1)*dv], W[i*dk:(i+1)*dk]
			vi := a.V[(c0+i)*a.H*dv+h*dv:][:dv]
			for x := range Ui {
				Ui[x] = bi * vi[x]
			}
			Ei, Ki := E[i*dk:(i+1)*dk], kRow(c0+i)
			for d := range Wi {
				Wi[d] = bi * Ei[d] * Ki[d]
			}
			negL := coef[:i]
			for jj := range negL {
				negL[jj] = -L[i*C+jj]
			}
			axpyRows(Ui, negL, U, dv)
			axpyRows(Wi, negL, W, dk)
		}
		// Vnew = U − W S, and the inter-chunk part of O: (exp(G) ⊙ Q) S.
		for i := 0; i < n; i++ {
			Vi := Vn[i*dv : (i+1)*dv]
			copy(Vi, U[i*dv:(i+1)*dv])
			Wi := W[i*dk : (i+1)*dk]
			cw := coef[:dk]
			for d, v := range Wi {
				cw[d] = -v
			}
			axpyRows(Vi, cw, S, dv)
			Oi := a.O[(c0+i)*a.H*dv+h*dv:][:dv]
			clear(Oi)
			mulInto(cw, qRow(c0+i), E[i*dk:(i+1)*dk])
			axpyRows(Oi, cw, S, dv)
		}
		// Intra-chunk part of O.
		for i := 0; i < n; i++ {
			Oi := a.O[(c0+i)*a.H*dv+h*dv:][:dv]
			axpyRows(Oi, Aqk[i*C:i*C+i+1], Vn, dv)
		}
		// State update: S = Diag(exp(G_{n−1})) S + Σ_j KP_j Vnew_jᵀ, where KP_j
		// now holds K_j ⊙ exp(G_{n−1} − G_j).
		El := E[(n-1)*dk : n*dk]
		for d := 0; d < dk; d++ {
			Srow := S[d*dv : (d+1)*dv]
			for x := range Srow {
				Srow[x] *= El[d]
			}
			ck := coef[:n]
			for jj := range ck {
				ck[jj] = KP[jj*dk+d]
			}
			axpyRows(Srow, ck, Vn, dv)
		}
	}
}

// mulInto sets dst[i] = x[i]·y[i].
func mulInto(dst, x, y []float32) {
	y = y[:len(x)]
	dst = dst[:len(x)]
	for i, v := range x {
		dst[i] = v * y[i]
	}
}
