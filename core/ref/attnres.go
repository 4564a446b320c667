package ref

import "math"

// AttnRes is one Block Attention Residuals read (Kimi K3, arXiv:2603.15031,
// architecture.md §4.3) for one token over the sources srcs (each of len d:
// completed block summaries and the running partial sum):
//
//	score_i = Σ_d ( v_i[d] / sqrt(mean(v_i²) + eps) ) · γ[d] · w[d]
//	out     = Σ_i softmax_i(score) · v_i
//
// w is the pseudo-query (…_res_proj.weight, [1, d]) and γ the RMSNorm
// weight (…_res_norm.weight) folded into it; the values are the raw,
// unnormalised sources. scores needs len(srcs) floats. out must not alias a
// source.
func AttnRes(out []float32, srcs [][]float32, w, gamma []float32, eps float32, scores []float32) {
	m := float32(math.Inf(-1))
	for i, v := range srcs {
		inv := rmsInv(v, eps)
		var s float32
		for d, x := range v {
			s += (x * inv) * gamma[d] * w[d]
		}
		scores[i] = s
		m = max(m, s)
	}
	var sum float32
	for i := range srcs {
		scores[i] = float32(math.Exp(float64(scores[i] - m)))
		sum += scores[i]
	}
	clear(out)
	for i, v := range srcs {
		Axpy(scores[i]/sum, v, out)
	}
}
