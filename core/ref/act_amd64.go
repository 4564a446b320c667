//go:build amd64 && !purego

package ref

// Implemented in act_avx512_amd64.s over n elements, n a multiple of 16.

//go:noescape
func expAVX512(dst, src *float32, n int)

//go:noescape
func sigmoidAVX512(dst, src *float32, n int)

//go:noescape
func siluAVX512(dst, src *float32, n int)

//go:noescape
func gluSiLUAVX512(out, gate, up *float32, n int)

//go:noescape
func gluSiTUAVX512(out, gate, up *float32, n int, beta, betaLin float32)

// vecHead is the part of n the 16-lane kernels take (0 without AVX-512).
func vecHead(n int) int {
	if !useAVX512 {
		return 0
	}
	return n &^ 15
}

func expVec(dst, src []float32) {
	dst = dst[:len(src)]
	n := vecHead(len(src))
	if n > 0 {
		expAVX512(&dst[0], &src[0], n)
	}
	expGeneric(dst[n:], src[n:])
}

func sigmoidVec(dst, src []float32) {
	dst = dst[:len(src)]
	n := vecHead(len(src))
	if n > 0 {
		sigmoidAVX512(&dst[0], &src[0], n)
	}
	sigmoidGeneric(dst[n:], src[n:])
}

func siluVec(dst, src []float32) {
	dst = dst[:len(src)]
	n := vecHead(len(src))
	if n > 0 {
		siluAVX512(&dst[0], &src[0], n)
	}
	siluGeneric(dst[n:], src[n:])
}

func gluVec(a Act, out, gate, up []float32) {
	up = up[:len(gate)]
	out = out[:len(gate)]
	n := vecHead(len(gate))
	if a.SiTU && a.BetaLin == 0 {
		n = 0 // uncapped up branch: the generic loop
	}
	if n > 0 {
		if a.SiTU {
			gluSiTUAVX512(&out[0], &gate[0], &up[0], n, a.Beta, a.BetaLin)
		} else {
			gluSiLUAVX512(&out[0], &gate[0], &up[0], n)
		}
	}
	a.gluGeneric(out[n:], gate[n:], up[n:])
}
