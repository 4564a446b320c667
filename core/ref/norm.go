package ref

import "math"

// RMSNorm computes, for each of the len(x)/len(w) rows of x,
//
//	out = w ⊙ x / sqrt(mean(x²) + eps)
//
// in float32 ("round-before-gamma" as in the Hugging Face references: the
// normalised value is formed first, then multiplied by w). out may alias x.
func RMSNorm(out, x, w []float32, eps float32) {
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		xr, or := x[r:r+d], out[r:r+d]
		inv := rmsInv(xr, eps)
		for i, v := range xr {
			or[i] = (v * inv) * w[i]
		}
	}
}

// rmsInv returns 1/sqrt(mean(x²) + eps), accumulated in float64 for a
// stable oracle.
func rmsInv(x []float32, eps float32) float32 {
	var ss float64
	for _, v := range x {
		ss += float64(v) * float64(v)
	}
	return float32(1 / math.Sqrt(ss/float64(len(x))+float64(eps)))
}

// GateAct selects the activation of a gated RMSNorm's gate.
type GateAct uint8

const (
	// GateSigmoid: y = norm(x) ⊙ σ(g) (KDA output gate, MLA output gate).
	GateSigmoid GateAct = iota
	// GateSiLU: y = norm(x) ⊙ SiLU(g) (Gated DeltaNet).
	GateSiLU
)

// RMSNormGated computes, row by row (rows of len(w)),
//
//	out = (w ⊙ x / sqrt(mean(x²) + eps)) ⊙ act(g)
//
// with act = σ or SiLU: the norm-then-gate order of FusedRMSNormGated.
// out may alias x.
func RMSNormGated(out, x, g, w []float32, eps float32, act GateAct) {
	d := len(w)
	for r := 0; r+d <= len(x); r += d {
		xr, gr, or := x[r:r+d], g[r:r+d], out[r:r+d]
		inv := rmsInv(xr, eps)
		var a [64]float32 // act(g) a chunk at a time: out may alias x
		for c := 0; c < d; c += len(a) {
			gc := gr[c:min(c+len(a), d)]
			ac := a[:len(gc)]
			if act == GateSiLU {
				siluVec(ac, gc)
			} else {
				sigmoidVec(ac, gc)
			}
			for i, av := range ac {
				or[c+i] = (xr[c+i] * inv) * w[c+i] * av
			}
		}
	}
}

// L2Norm scales each row of length d of x in place to
//
//	x / sqrt(Σ x² + eps) · scale
//
// (fla l2norm with eps 1e-6; scale = dk^-1/2 for KDA queries, 1 for keys).
func L2Norm(x []float32, d int, eps, scale float32) {
	for r := 0; r+d <= len(x); r += d {
		xr := x[r : r+d]
		var ss float64
		for _, v := range xr {
			ss += float64(v) * float64(v)
		}
		inv := float32(1/math.Sqrt(ss+float64(eps))) * scale
		for i := range xr {
			xr[i] *= inv
		}
	}
}
