package gguf

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
)

// nearestInt rounds to the nearest integer, halves to even, as ggml's
// nearest_int does (adding 1.5·2^23 in float32); |f| ≤ 2^22.
func nearestInt(f float32) int {
	v := f + 12582912
	return int(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// qkx2 fits x[i] ≈ scale·L[i] − minOut (L in [0, nmax]) minimising the
// weighted squared error over a grid of nstep+1 inverse scales around
// nmax/(max−min), as ggml's make_qkx2_quants (least-squares scale and
// min per candidate; the min is clamped to ≤ 0). It returns the scale and
// the positive offset minOut; every float32 operation is rounded in ggml's
// order.
func qkx2(x, w []float32, L, laux []uint8, nmax int, rmin, rdelta float32, nstep int) (scale, minOut float32) {
	n := len(x)
	mn, mx := x[0], x[0]
	sumW := w[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		mn, mx = min(mn, x[i]), max(mx, x[i])
		sumW += w[i]
		sumX += float32(w[i] * x[i])
	}
	if mn > 0 {
		mn = 0
	}
	if mx == mn {
		clear(L[:n])
		return 0, -mn
	}
	fmax := float32(nmax)
	iscale := fmax / (mx - mn)
	scale = 1 / iscale
	var bestErr float32
	for i := 0; i < n; i++ {
		l := max(0, min(nmax, nearestInt(iscale*(x[i]-mn))))
		L[i] = uint8(l)
		diff := float32(float32(scale*float32(l))+mn) - x[i]
		bestErr += float32(w[i] * float32(diff*diff))
	}
	for is := 0; is <= nstep; is++ {
		iscale = float32(float32(rmin+float32(rdelta*float32(is)))+fmax) / (mx - mn)
		var sumL, sumL2, sumXL float32
		for i := 0; i < n; i++ {
			l := max(0, min(nmax, nearestInt(iscale*(x[i]-mn))))
			laux[i] = uint8(l)
			wl := w[i] * float32(l)
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * x[i])
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var cur float32
			for i := 0; i < n; i++ {
				diff := float32(float32(thisScale*float32(laux[i]))+thisMin) - x[i]
				cur += float32(w[i] * float32(diff*diff))
			}
			if cur < bestErr {
				copy(L[:n], laux[:n])
				bestErr, scale, mn = cur, thisScale, thisMin
			}
		}
	}
	return scale, -mn
}

// QuantizeQ4K quantizes x (length a multiple of 256) to Q4_K as ggml's
// reference quantize_row_q4_K_ref does: per 32-element sub-block j, the
// weights av + |x| (av = sqrt(mean x²)) drive qkx2 (nmax 15, grid
// −1 + 0.1·k for k ≤ 20) to a scale s_j and min m_j; d = max s/63 and
// dmin = max m/63 (fp16) quantize them to 6 bits, and each value is
// requantized as q = round((x + dmin·m6)/(d·s6)) clamped to [0, 15].
func QuantizeQ4K(x []float32) ([]byte, error) {
	const bl, bb = qkK, 144
	if len(x)%bl != 0 {
		return nil, fmt.Errorf("Q4_K needs a multiple of %d values, got %d", bl, len(x))
	}
	out := make([]byte, len(x)/bl*bb)
	var L [qkK]uint8
	var laux [32]uint8
	var w [32]float32
	var scales, mins [8]float32
	for b := 0; b < len(x)/bl; b++ {
		xb := x[b*bl : (b+1)*bl]
		o := out[b*bb : (b+1)*bb]
		var maxScale, maxMin float32
		for j := 0; j < 8; j++ {
			xs := xb[32*j : 32*j+32]
			var sumX2 float32
			for _, v := range xs {
				sumX2 += float32(v * v)
			}
			av := float32(math.Sqrt(float64(sumX2 / 32)))
			for l, v := range xs {
				w[l] = av + float32(math.Abs(float64(v)))
			}
			scales[j], mins[j] = qkx2(xs, w[:], L[32*j:32*j+32], laux[:], 15, -1, 0.1, 20)
			maxScale, maxMin = max(maxScale, scales[j]), max(maxMin, mins[j])
		}
		var invScale, invMin float32
		if maxScale > 0 {
			invScale = 63 / maxScale
		}
		if maxMin > 0 {
			invMin = 63 / maxMin
		}
		sc := o[4:16]
		for j := 0; j < 8; j++ {
			ls := min(63, uint8(nearestInt(invScale*scales[j])))
			lm := min(63, uint8(nearestInt(invMin*mins[j])))
			if j < 4 {
				sc[j], sc[j+4] = ls, lm
			} else {
				sc[j+4] = ls&15 | (lm&15)<<4
				sc[j-4] |= (ls >> 4) << 6
				sc[j] |= (lm >> 4) << 6
			}
		}
		dh, mh := half.F32ToF16(maxScale/63), half.F32ToF16(maxMin/63)
		binary.LittleEndian.PutUint16(o[0:], dh)
		binary.LittleEndian.PutUint16(o[2:], mh)
		for j := 0; j < 8; j++ {
			s6, m6 := tensor.ScaleMinK4(j, sc)
			d := half.F16ToF32(dh) * float32(s6)
			if d == 0 {
				continue
			}
			dm := half.F16ToF32(mh) * float32(m6)
			for i := 0; i < 32; i++ {
				L[32*j+i] = uint8(max(0, min(15, nearestInt((xb[32*j+i]+dm)/d))))
			}
		}
		q := o[16:144]
		for j := 0; j < qkK; j += 64 {
			for l := 0; l < 32; l++ {
				q[j/2+l] = L[j+l] | L[j+l+32]<<4
			}
		}
	}
	return out, nil
}
