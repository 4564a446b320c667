package ref

import "math"

// Router is the configuration of an MoE router: the sigmoid "noaux_tc"
// router of DeepSeek-V3 / Kimi Linear / Kimi K3, or (Softmax) the softmax
// top-k router of Qwen3-Next.
type Router struct {
	TopK int
	// Softmax scores the experts with a softmax over all E logits instead
	// of σ (Qwen3-Next; architecture.md §3.4).
	Softmax bool
	// Groups and TopKGroups enable group-limited selection when
	// Groups > 1 and Groups > TopKGroups (num_expert_group, topk_group).
	Groups, TopKGroups int
	// Renormalize divides the selected weights by their sum (+1e−20) when
	// TopK > 1 (moe_renormalize / norm_topk_prob).
	Renormalize bool
	// RenormalizeAnyK renormalises for TopK == 1 too (DeepSeek-V3 and
	// Qwen3-Next norm_topk_prob; Kimi's moe_renormalize skips k = 1).
	RenormalizeAnyK bool
	// Scale is routed_scaling_factor (ρ).
	Scale float32
}

// Route selects the experts of one token from its router logits (len E)
// and the frozen selection bias (e_score_correction_bias, len E):
//
//	s      = σ(logits)                  affinities; they give the weights
//	         (softmax(logits) with Softmax)
//	s_sel  = s + bias                   used ONLY to choose experts
//	(group-limited: group score = sum of its two best s_sel; experts outside
//	 the TopKGroups best groups get s_sel = −inf)
//	idx    = top-k of s_sel             (ties: lower expert id first)
//	w      = s[idx];  w /= Σw + 1e−20 (if Renormalize and k > 1, or
//	         RenormalizeAnyK);  w *= ρ
//
// idx and w receive TopK entries in selection order. scratch needs 2·E
// floats.
func (r Router) Route(idx []int, w []float32, logits, bias, scratch []float32) {
	E := len(logits)
	s, sel := scratch[:E], scratch[E:2*E]
	if r.Softmax {
		softmaxInto(s, logits)
	} else {
		sigmoidVec(s, logits)
	}
	for e := range logits {
		sel[e] = s[e]
		if bias != nil {
			sel[e] += bias[e]
		}
	}
	negInf := float32(math.Inf(-1))
	if r.Groups > 1 && r.Groups > r.TopKGroups {
		r.maskGroups(sel, negInf)
	}
	k := r.TopK
	for i := 0; i < k; i++ {
		best := -1
		for e := 0; e < E; e++ {
			v := sel[e]
			if v != v { // NaN marks an expert already chosen
				continue
			}
			if best < 0 || v > sel[best] {
				best = e
			}
		}
		idx[i] = best
		w[i] = s[best]
		sel[best] = float32(math.NaN())
	}
	if r.Renormalize && (k > 1 || r.RenormalizeAnyK) {
		var sum float32
		for i := 0; i < k; i++ {
			sum += w[i]
		}
		for i := 0; i < k; i++ {
			w[i] /= sum + 1e-20
		}
	}
	for i := 0; i < k; i++ {
		w[i] *= r.Scale
	}
}

// maskGroups sets sel to −inf for experts outside the TopKGroups groups with
// the highest sum of their two best scores.
func (r Router) maskGroups(sel []float32, negInf float32) {
	E := len(sel)
	per := E / r.Groups
	var scoreBuf [64]float32
	var keepBuf [64]bool
	gs, keep := scoreBuf[:0], keepBuf[:0]
	if r.Groups > 64 {
		gs, keep = make([]float32, 0, r.Groups), make([]bool, 0, r.Groups)
	}
	for g := 0; g < r.Groups; g++ {
		b1, b2 := negInf, negInf
		for _, v := range sel[g*per : (g+1)*per] {
			if v > b1 {
				b1, b2 = v, b1
			} else if v > b2 {
				b2 = v
			}
		}
		gs = append(gs, b1+b2)
		keep = append(keep, false)
	}
	for i := 0; i < r.TopKGroups; i++ {
		best := -1
		for g := range gs {
			if !keep[g] && (best < 0 || gs[g] > gs[best]) {
				best = g
			}
		}
		keep[best] = true
	}
	for g := range gs {
		if !keep[g] {
			for e := g * per; e < (g+1)*per; e++ {
				sel[e] = negInf
			}
		}
	}
}

// softmaxInto writes dst = softmax(src) (max-subtracted, summed in float64).
func softmaxInto(dst, src []float32) {
	m := src[0]
	for _, v := range src {
		m = max(m, v)
	}
	var sum float64
	for i, v := range src {
		e := math.Exp(float64(v - m))
		dst[i] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	for i := range dst[:len(src)] {
		dst[i] *= inv
	}
}
