package vision

import (
	"math"

	"github.com/tessera-llm/tessera/core/ref"
)

// Apply applies a to every element of x in place.
func (a Act) Apply(x []float32) {
	f := ref.GELUTanh
	if a == ActGELUErf {
		f = ref.GELUErf
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
