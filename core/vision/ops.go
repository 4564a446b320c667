package vision

import (
	"math"

	"github.com/tessera-llm/tessera/core/ref"
)

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

// Apply applies a to every element of x in place.
func (a Act) Apply(x []float32) {
	f := GELUTanh
	if a == ActGELUErf {
		f = GELUErf
	}
	for i, v := range x {
		x[i] = f(v)
	}
}

// AddBias adds b to every row of x (rows of len(b)): x[t, i] += b[i].
// A nil b is a no-op.
func AddBias(x, b []float32) {
	if len(b) == 0 {
		return
	}
	d := len(b)
	for r := 0; r+d <= len(x); r += d {
		xr := x[r : r+d]
		for i, v := range b {
			xr[i] += v
		}
	}
}

// RoPE2DTable returns cos and sin tables [N, hd/2] of the 2D rotary
// embedding of MoonViT / Kimi K3 for patches at (rows[n], cols[n]): complex
// pair k = 2i + a (pair k rotates elements 2k and 2k+1) has angle
//
//	θ_k = col·ω_i if a = 0,  row·ω_i if a = 1,   ω_i = theta^(−4i/hd), i < hd/4
//
// i.e. pairs alternate between the width and the height axis.
func RoPE2DTable(rows, cols []int, hd int, theta float32) (cos, sin []float32) {
	half := hd / 2
	N := len(rows)
	cos = make([]float32, N*half)
	sin = make([]float32, N*half)
	for n := range N {
		for i := 0; i < hd/4; i++ {
			w := math.Pow(float64(theta), -4*float64(i)/float64(hd))
			for a, pos := range [2]int{cols[n], rows[n]} {
				ang := float64(pos) * w
				cos[n*half+2*i+a] = float32(math.Cos(ang))
				sin[n*half+2*i+a] = float32(math.Sin(ang))
			}
		}
	}
	return cos, sin
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

// Attention is non-causal multi-head attention within one image: for each
// head h and query n, with q, k, v of shape [N, H·hd] (heads contiguous),
//
//	out[n, h] = Σ_m softmax_m(q[n,h]·k[m,h] / √hd) · v[m, h]
//
// (max-subtracted softmax, float32 accumulation). out is [N, H·hd].
// Work is split over (head, query) pairs on p (nil: inline).
func Attention(p *ref.Pool, out, q, k, v []float32, N, H, hd int) {
	j := &attnJob{out: out, q: q, k: k, v: v, N: N, H: H, hd: hd}
	if p == nil {
		j.Run(0, 0, N*H)
		return
	}
	p.For(N*H, max(1, 4096/max(1, N*hd)), j)
}

type attnJob struct {
	out, q, k, v []float32
	N, H, hd     int
}

// Run handles (head, query) pairs [lo, hi), index = h·N + n.
func (j *attnJob) Run(_, lo, hi int) {
	N, H, hd := j.N, j.H, j.hd
	s := make([]float32, N)
	scale := float32(1 / math.Sqrt(float64(hd)))
	for idx := lo; idx < hi; idx++ {
		h, n := idx/N, idx%N
		qv := j.q[(n*H+h)*hd : (n*H+h+1)*hd]
		mx := float32(math.Inf(-1))
		for m := range N {
			s[m] = ref.Dot(qv, j.k[(m*H+h)*hd:(m*H+h+1)*hd]) * scale
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
			ref.Axpy(s[m]*inv, j.v[(m*H+h)*hd:(m*H+h+1)*hd], o)
		}
	}
}

// InterpPosEmb resamples a learnable position table w ([h0, w0, D]) to an
// h×w grid with bilinear interpolation, align_corners = false (PyTorch
// F.interpolate "bilinear"): output (y, x) reads source coordinate
//
//	sy = max(0, (y + ½)·h0/h − ½),  sx = max(0, (x + ½)·w0/w − ½)
//
// blending the 4 neighbours ⌊s⌋ and min(⌊s⌋+1, size−1) with weights
// (1 − frac, frac). Returns [h·w, D] row-major over (y, x). When
// (h, w) = (h0, w0) it is an exact copy.
func InterpPosEmb(tab []float32, h0, w0, D, h, w int) []float32 {
	out := make([]float32, h*w*D)
	axis := func(o, in, n int) (int, int, float32) {
		s := math.Max(0, (float64(o)+0.5)*float64(in)/float64(n)-0.5)
		i0 := min(int(s), in-1)
		i1 := min(i0+1, in-1)
		return i0, i1, float32(s - float64(i0))
	}
	for y := range h {
		y0, y1, fy := axis(y, h0, h)
		for x := range w {
			x0, x1, fx := axis(x, w0, w)
			o := out[(y*w+x)*D : (y*w+x+1)*D]
			for _, c := range [4]struct {
				yy, xx int
				wt     float32
			}{{y0, x0, (1 - fy) * (1 - fx)}, {y0, x1, (1 - fy) * fx}, {y1, x0, fy * (1 - fx)}, {y1, x1, fy * fx}} {
				if c.wt != 0 {
					ref.Axpy(c.wt, tab[(c.yy*w0+c.xx)*D:(c.yy*w0+c.xx+1)*D], o)
				}
			}
		}
	}
	return out
}
