package ref

// ShortConv is the short causal depthwise convolution of KDA (and GDN)
// followed by SiLU. For channel c with taps w_c ∈ R^K (w_c[K−1] multiplies
// the current token):
//
//	y_t[c] = SiLU( Σ_{j=0}^{K−1} w_c[j] · x_{t−(K−1)+j}[c] )
//
// x is [T, C] (the projected q, k or v before the conv), w is [C, K]
// (checkpoint shape [C, 1, K]), state is [K−1, C]: the last K−1 inputs of
// the previous piece, oldest first (zeros at sequence start). On return
// state holds the last K−1 inputs including this piece, so pieces of any
// size give the same result as one call over the whole sequence.
// out is [T, C] and must not alias x.
func ShortConv(out, x, w, state []float32, T, C, K int) {
	convTokens(out, x, w, state, 0, T, C, K)
	convShift(x, state, T, C, K)
}

// ShortConvRows is ShortConv with the tokens split over p's workers (each
// token's output reads only the inputs and the incoming state, so the
// values are ShortConv's).
func ShortConvRows(p *Pool, out, x, w, state []float32, T, C, K int) {
	p = poolOr(p)
	if T < 2 || p.n == 1 {
		ShortConv(out, x, w, state, T, C, K)
		return
	}
	p.conv = convJob{out: out, x: x, w: w, state: state, C: C, K: K}
	p.For(T, max(1, 16384/(C*K)), &p.conv)
	p.conv = convJob{}
	convShift(x, state, T, C, K)
}

type convJob struct {
	out, x, w, state []float32
	C, K             int
}

func (j *convJob) Run(_, lo, hi int) { convTokens(j.out, j.x, j.w, j.state, lo, hi, j.C, j.K) }

// convTokens writes ShortConv's outputs of tokens [lo, hi).
func convTokens(out, x, w, state []float32, lo, hi, C, K int) {
	hist := K - 1
	for t := lo; t < hi; t++ {
		o := out[t*C : (t+1)*C]
		for c := 0; c < C; c++ {
			wc := w[c*K : (c+1)*K]
			var s float32
			for j := 0; j < K; j++ {
				src := t - hist + j // index into the virtual [state; x] sequence
				var v float32
				if src >= 0 {
					v = x[src*C+c]
				} else {
					v = state[(hist+src)*C+c]
				}
				s += wc[j] * v
			}
			o[c] = s
		}
		siluVec(o, o)
	}
}

// convShift moves state on past T tokens of x: it keeps the last K−1
// inputs of [state; x].
func convShift(x, state []float32, T, C, K int) {
	hist := K - 1
	if T >= hist {
		copy(state, x[(T-hist)*C:T*C])
		return
	}
	copy(state, state[T*C:])
	copy(state[(hist-T)*C:], x[:T*C])
}
