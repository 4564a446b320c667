package ref

import "math"

// YaRN is the "yarn" rope_scaling of a checkpoint (YaRN, arXiv:2309.00071;
// architecture.md §7.2). Factor ≤ 1 disables it.
type YaRN struct {
	Factor           float64 // s
	OriginalMaxPos   int     // original_max_position_embeddings L0
	BetaFast         float64 // default 32
	BetaSlow         float64 // default 1
	MScale           float64 // mscale (0: absent)
	MScaleAllDim     float64 // mscale_all_dim (0: absent)
	AttentionFactor  float64 // attention_factor (0: absent, derived below)
	TruncateCorrDims bool    // floor/ceil the correction range (truncate, default true)
}

// YaRNMScale is the YaRN magnitude correction
//
//	mscale(s, m) = 0.1·m·ln(s) + 1   (s > 1),   1 otherwise.
func YaRNMScale(s, m float64) float64 {
	if s <= 1 {
		return 1
	}
	return 0.1*m*math.Log(s) + 1
}

// CosSinFactor is the factor YaRN multiplies cos and sin by:
//
//	attention_factor                                  when given, else
//	mscale(s, mscale) / mscale(s, mscale_all_dim)      when both are given (non-zero), else
//	mscale(s, 1)
func (y *YaRN) CosSinFactor() float64 {
	switch {
	case y.AttentionFactor != 0:
		return y.AttentionFactor
	case y.MScale != 0 && y.MScaleAllDim != 0:
		return YaRNMScale(y.Factor, y.MScale) / YaRNMScale(y.Factor, y.MScaleAllDim)
	}
	return YaRNMScale(y.Factor, 1)
}

// RoPE is a rotary position embedding over the first Dim channels of a
// head (partial rotary when Dim < head dim; the rest pass through).
// Channel pairs are (i, i+Dim/2) (rotate_half, HF Llama/Qwen, llama.cpp
// NEOX) or, with Interleaved, (2i, 2i+1) (DeepSeek's complex view,
// transformers' rope_interleave, llama.cpp NORM). Pair i at position p is
// rotated by the angle p·InvFreq[i]:
//
//	(a, b) ← (a·cos − b·sin, b·cos + a·sin) · CosSin
type RoPE struct {
	Dim         int
	Interleaved bool
	InvFreq     []float64 // Dim/2 frequencies
	CosSin      float64   // cos/sin multiplier (YaRN attention factor; 1 otherwise)
}

// NewRoPE returns the rotary embedding of dim channels with base theta:
//
//	inv_freq_i = θ^{−2i/dim},   i = 0 … dim/2−1
//
// and, with y non-nil and y.Factor > 1, YaRN's blend of interpolated and
// extrapolated frequencies (transformers _compute_yarn_parameters):
//
//	corr(r)  = dim·ln(L0/(2π r)) / (2 ln θ)
//	low      = max(floor(corr(β_fast)), 0),  high = min(ceil(corr(β_slow)), dim−1)
//	ramp_i   = clamp((i − low)/(high − low), 0, 1)      (high == low ⇒ high += 0.001)
//	inv_freq_i = (inv_freq_i/s)·ramp_i + inv_freq_i·(1 − ramp_i)
//	CosSin   = y.CosSinFactor()
func NewRoPE(dim int, theta float64, interleaved bool, y *YaRN) *RoPE {
	r := &RoPE{Dim: dim, Interleaved: interleaved, InvFreq: make([]float64, dim/2), CosSin: 1}
	for i := range r.InvFreq {
		r.InvFreq[i] = 1 / math.Pow(theta, float64(2*i)/float64(dim))
	}
	if y == nil || y.Factor <= 1 {
		return r
	}
	bf, bs := y.BetaFast, y.BetaSlow
	if bf == 0 {
		bf = 32
	}
	if bs == 0 {
		bs = 1
	}
	corr := func(rot float64) float64 {
		return float64(dim) * math.Log(float64(y.OriginalMaxPos)/(rot*2*math.Pi)) / (2 * math.Log(theta))
	}
	low, high := corr(bf), corr(bs)
	if y.TruncateCorrDims {
		low, high = math.Floor(low), math.Ceil(high)
	}
	low, high = math.Max(low, 0), math.Min(high, float64(dim-1))
	if high == low {
		high += 0.001
	}
	for i := range r.InvFreq {
		ramp := math.Min(math.Max((float64(i)-low)/(high-low), 0), 1)
		r.InvFreq[i] = r.InvFreq[i]/y.Factor*ramp + r.InvFreq[i]*(1-ramp)
	}
	r.CosSin = y.CosSinFactor()
	return r
}

// Apply rotates, in place, the first Dim channels of each head of x for
// position pos: heads start stride floats apart (x may end after the last
// head's rotary channels).
func (r *RoPE) Apply(x []float32, stride, pos int) {
	half := r.Dim / 2
	for o := 0; o+r.Dim <= len(x); o += stride {
		h := x[o : o+r.Dim]
		for i := 0; i < half; i++ {
			s, c := math.Sincos(float64(pos) * r.InvFreq[i])
			s, c = s*r.CosSin, c*r.CosSin
			ia, ib := i, i+half
			if r.Interleaved {
				ia, ib = 2*i, 2*i+1
			}
			a, b := float64(h[ia]), float64(h[ib])
			h[ia] = float32(a*c - b*s)
			h[ib] = float32(b*c + a*s)
		}
	}
}

// Table writes cos and sin of every pair for positions [pos0, pos0+n)
// into dst ([n, Dim/2, 2], each × CosSin), with the angles formed in
// float64 as Apply forms them: the rotation of a backend that cannot form
// large angles exactly (a GPU's f32) is then Apply's to f32 rounding.
func (r *RoPE) Table(dst []float32, pos0, n int) {
	half := r.Dim / 2
	for t := 0; t < n; t++ {
		for i := 0; i < half; i++ {
			s, c := math.Sincos(float64(pos0+t) * r.InvFreq[i])
			o := (t*half + i) * 2
			dst[o], dst[o+1] = float32(c*r.CosSin), float32(s*r.CosSin)
		}
	}
}
