//go:build amd64 && !purego

package ref

import "github.com/tessera-llm/tessera/core/tensor"

// Implemented in rows_avx512_amd64.s; d a multiple of 16, rows > 0.

//go:noescape
func axpyRowsAVX512(dst, c, R *float32, ld, rows, d int)

//go:noescape
func mulRowsAVX512(dst, v *float32, rows, d int)

// axpyRows is axpyRowsGeneric, 64 or 16 columns at a time on AVX-512.
func axpyRows(dst, c, R []float32, ld int) {
	d, rows := len(dst), len(c)
	if rows == 0 || d == 0 {
		return
	}
	_ = R[(rows-1)*ld+d-1]
	n := vecHead(d)
	if n > 0 {
		axpyRowsAVX512(&dst[0], &c[0], &R[0], ld, rows, n)
	}
	if n < d {
		for r, cr := range c {
			axpy(cr, R[r*ld+n:r*ld+d], dst[n:])
		}
	}
}

// mulRows is mulRowsGeneric on AVX-512 when len(v) is a multiple of 16.
func mulRows(dst, v []float32) {
	d := len(v)
	if d == 0 || len(dst) < d {
		return
	}
	if vecHead(d) != d {
		mulRowsGeneric(dst, v)
		return
	}
	mulRowsAVX512(&dst[0], &v[0], len(dst)/d, d)
}

// dotRows is dotRowsGeneric with the four-row GEMV kernel on AVX-512.
func dotRows(out, x, R []float32, ld int) {
	d := len(x)
	r := 0
	if useAVX512 && d >= 16 {
		for ; r+4 <= len(out); r += 4 {
			w := rows4{dt: tensor.F32, f32: R[r*ld : r*ld+3*ld+d], ldw: ld, n: d}
			w.gemv(x, (*[4]float32)(out[r:r+4]))
		}
	}
	for ; r < len(out); r++ {
		out[r] = dot(R[r*ld:r*ld+d], x)
	}
}

//go:noescape
func kdaStepAVX512(S, k, q, e, v, o *float32, beta float32, dk, dv int)

// kdaStep is kdaStepGeneric in two passes over S per 16 value columns on
// AVX-512.
func kdaStep(S, k, q, e, v, o []float32, beta float32) {
	dk, dv := len(k), len(v)
	if vecHead(dv) != dv || dk == 0 {
		kdaStepGeneric(S, k, q, e, v, o, beta)
		return
	}
	_, _, _, _ = S[dk*dv-1], q[dk-1], e[dk-1], o[dv-1]
	kdaStepAVX512(&S[0], &k[0], &q[0], &e[0], &v[0], &o[0], beta, dk, dv)
}
