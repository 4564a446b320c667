package ref

// Row-block helpers of the chunked KDA: one call over a block of rows in
// place of one Axpy, Dot or multiply per row. The portable forms below are
// the fallback and the reference of the AVX-512 ones (rows_amd64.go).

// axpyRowsGeneric computes dst[k] += Σ_{r<len(c)} c[r]·R[r·ld + k] for
// k < len(dst), adding the terms in r order.
func axpyRowsGeneric(dst, c, R []float32, ld int) {
	d := len(dst)
	for r, cr := range c {
		axpy(cr, R[r*ld:r*ld+d], dst)
	}
}

// mulRowsGeneric computes dst[r·d + k] *= v[k] for every row of dst
// (d = len(v)).
func mulRowsGeneric(dst, v []float32) {
	d := len(v)
	for r := 0; r+d <= len(dst); r += d {
		mulInto(dst[r:r+d], dst[r:r+d], v)
	}
}

// dotRowsGeneric computes out[r] = Σ_k x[k]·R[r·ld + k] for r < len(out),
// k < len(x).
func dotRowsGeneric(out, x, R []float32, ld int) {
	d := len(x)
	for r := range out {
		out[r] = dot(R[r*ld:r*ld+d], x)
	}
}
