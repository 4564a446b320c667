package ref

import "math"

// Sigmoid is σ(x) = 1/(1+e^{−x}).
func Sigmoid(x float32) float32 {
	return float32(1 / (1 + math.Exp(-float64(x))))
}

// SiLU is x·σ(x).
func SiLU(x float32) float32 { return x * Sigmoid(x) }

// Softplus is log(1+e^x), computed as max(x,0) + log1p(e^{−|x|}).
func Softplus(x float32) float32 {
	v := float64(x)
	return float32(math.Max(v, 0) + math.Log1p(math.Exp(-math.Abs(v))))
}

// Sigmoids writes dst[i] = σ(src[i]) (dst may alias src). Like the other
// slice activations below (and expVec, the exp of the chunked KDA) it runs
// 16 lanes at a time with float32 arithmetic where AVX-512 is available,
// within a few ulp of the scalar float64 forms, which are its reference
// and fallback.
func Sigmoids(dst, src []float32) { sigmoidVec(dst, src) }

// SiLUInPlace applies SiLU to every element of x.
func SiLUInPlace(x []float32) { siluVec(x, x) }

// Act is a GLU expert's activation.
type Act struct {
	// SiTU selects SiTU-GLU (Kimi K3); false selects SiLU-GLU.
	SiTU bool
	// Beta is activation_situ_beta (β); BetaLin is
	// activation_situ_linear_beta (β_lin, 0 = no soft cap on up).
	Beta, BetaLin float32
}

// GLU computes h[i] = act(gate[i], up[i]) for the paired halves of an
// expert, writing into out (which may alias gate):
//
//	SiLU-GLU:  h = SiLU(gate) ⊙ up
//	SiTU-GLU:  h = (β·tanh(gate/β)·σ(gate)) ⊙ (β_lin·tanh(up/β_lin))
//
// (K3 SituAndMul; with β_lin = 0 the up branch is left uncapped.)
func (a Act) GLU(out, gate, up []float32) { gluVec(a, out, gate, up) }

// gluGeneric is GLU in float64 scalar arithmetic.
func (a Act) gluGeneric(out, gate, up []float32) {
	up = up[:len(gate)]
	out = out[:len(gate)]
	if !a.SiTU {
		for i, g := range gate {
			out[i] = SiLU(g) * up[i]
		}
		return
	}
	b, bl := float64(a.Beta), float64(a.BetaLin)
	for i, g := range gate {
		gg := float64(g)
		gp := b * math.Tanh(gg/b) / (1 + math.Exp(-gg))
		u := float64(up[i])
		if bl != 0 {
			u = bl * math.Tanh(u/bl)
		}
		out[i] = float32(gp * u)
	}
}

func expGeneric(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = float32(math.Exp(float64(v)))
	}
}

func sigmoidGeneric(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = Sigmoid(v)
	}
}

func siluGeneric(dst, src []float32) {
	dst = dst[:len(src)]
	for i, v := range src {
		dst[i] = SiLU(v)
	}
}
