package ref

import "math"

// Vision tower ops (MoonViT / Kimi K3, architecture.md §6).

// LayerNorm computes, for each row of x of length d = len(w),
//
//	out = (x − μ) / sqrt(σ² + eps) ⊙ w + b,   μ = mean(x), σ² = mean((x − μ)²)
//
// (PyTorch nn.LayerNorm, biased variance; statistics in float64). b may be
// nil (no bias). out may alias x.
func LayerNorm(out, x, w, b []float32, eps float32) {
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		xr, or := x[r:r+d], out[r:r+d]
		var s float64
		for _, v := range xr {
			s += float64(v)
		}
		mu := s / float64(d)
		var ss float64
		for _, v := range xr {
			dv := float64(v) - mu
			ss += dv * dv
		}
		inv := 1 / math.Sqrt(ss/float64(d)+float64(eps))
		for i, v := range xr {
			y := float32((float64(v) - mu) * inv)
			y *= w[i]
			if b != nil {
				y += b[i]
			}
			or[i] = y
		}
	}
}

// GELUTanh is gelu_pytorch_tanh:
//
//	GELU(x) ≈ ½·x·(1 + tanh(√(2/π)·(x + 0.044715·x³))).
func GELUTanh(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Tanh(math.Sqrt(2/math.Pi)*(v+0.044715*v*v*v))))
}

// GELUErf is the exact GELU: GELU(x) = ½·x·(1 + erf(x/√2)).
func GELUErf(x float32) float32 {
	v := float64(x)
	return float32(0.5 * v * (1 + math.Erf(v/math.Sqrt2)))
}

// ApplyRoPE rotates each head of x ([N, H·hd], heads contiguous) in place
// by the table from RoPE2DTable, treating elements (2k, 2k+1) as the
// complex number x_{2k} + i·x_{2k+1}:
//
//	x'_{2k}   = x_{2k}·cos θ_k − x_{2k+1}·sin θ_k
//	x'_{2k+1} = x_{2k}·sin θ_k + x_{2k+1}·cos θ_k
func ApplyRoPE(x []float32, N, H, hd int, cos, sin []float32) {
	half := hd / 2
	for n := range N {
		c, s := cos[n*half:(n+1)*half], sin[n*half:(n+1)*half]
		for h := range H {
			v := x[(n*H+h)*hd : (n*H+h+1)*hd]
			for k := range half {
				a, b := v[2*k], v[2*k+1]
				v[2*k] = a*c[k] - b*s[k]
				v[2*k+1] = a*s[k] + b*c[k]
			}
		}
	}
}

// ImageAttention is non-causal multi-head attention within one image: for each
// head h and query n, with q, k, v of shape [N, H·hd] (heads contiguous),
//
//	out[n, h] = Σ_m softmax_m(q[n,h]·k[m,h] / √hd) · v[m, h]
//
// (max-subtracted softmax, float32 accumulation). out is [N, H·hd].
// Work is split over (head, query) pairs on p (nil: inline).
func ImageAttention(p *Pool, out, q, k, v []float32, N, H, hd int) {
	j := &imageAttnJob{out: out, q: q, k: k, v: v, N: N, H: H, hd: hd}
	if p == nil {
		j.Run(0, 0, N*H)
		return
	}
	p.For(N*H, max(1, 4096/max(1, N*hd)), j)
}

type imageAttnJob struct {
	out, q, k, v []float32
	N, H, hd     int
}

// Run handles (head, query) pairs [lo, hi), index = h·N + n.
func (j *imageAttnJob) Run(_, lo, hi int) {
	N, H, hd := j.N, j.H, j.hd
	s := make([]float32, N)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for idx := lo; idx < hi; idx++ {
		h, n := idx/N, idx%N
		qv := j.q[(n*H+h)*hd : (n*H+h+1)*hd]
		mx := float32(math.Inf(-1))
		for m := range N {
			s[m] = Dot(qv, j.k[(m*H+h)*hd:(m*H+h+1)*hd]) * scale
			mx = max(mx, s[m])
		}
		var sum float32
		for m := range N {
			s[m] = float32(math.Exp(float64(s[m] - mx)))
			sum += s[m]
		}
		o := j.out[(n*H+h)*hd : (n*H+h+1)*hd]
		clear(o)
		inv := 1 / sum
		for m := range N {
			Axpy(s[m]*inv, j.v[(m*H+h)*hd:(m*H+h+1)*hd], o)
		}
	}
}
