package ref

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRowKernelsMatchGeneric checks axpyRows, mulRows, dotRows and the
// fused KDA step against their portable forms over widths that hit the
// 64- and 16-column blocks and the scalar tails.
func TestRowKernelsMatchGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	for _, d := range []int{1, 15, 16, 17, 48, 64, 80, 100, 128} {
		for _, rows := range []int{1, 2, 5, 64} {
			ld := d + r.IntN(3)
			R := randVec(r, rows*ld, 1)
			c := randVec(r, rows, 1)
			got, want := randVec(r, d, 1), make([]float32, d)
			copy(want, got)
			axpyRows(got, c, R, ld)
			axpyRowsGeneric(want, c, R, ld)
			for i := range want {
				require.InDelta(t, want[i], got[i], 1e-5*(1+math.Abs(float64(want[i]))), "axpyRows d=%d rows=%d i=%d", d, rows, i)
			}

			m1 := randVec(r, rows*d, 1)
			m2 := append([]float32(nil), m1...)
			v := randVec(r, d, 1)
			mulRows(m1, v)
			mulRowsGeneric(m2, v)
			require.Equal(t, m2, m1, "mulRows d=%d rows=%d", d, rows)

			x := randVec(r, d, 1)
			o1, o2 := make([]float32, rows), make([]float32, rows)
			dotRows(o1, x, R, ld)
			dotRowsGeneric(o2, x, R, ld)
			for i := range o1 {
				require.InDelta(t, o2[i], o1[i], dotTol(R[i*ld:i*ld+d], x), "dotRows d=%d rows=%d i=%d", d, rows, i)
			}
		}
	}
	for _, dk := range []int{1, 16, 64, 100} {
		for _, dv := range []int{16, 17, 64, 128} {
			S1 := randVec(r, dk*dv, 0.5)
			S2 := append([]float32(nil), S1...)
			k, q, v := randVec(r, dk, 0.2), randVec(r, dk, 0.2), randVec(r, dv, 1)
			e := make([]float32, dk)
			for i := range e {
				e[i] = float32(math.Exp(-r.Float64()))
			}
			o1, o2 := make([]float32, dv), make([]float32, dv)
			for range 3 { // a few tokens: the state carries the differences on
				kdaStep(S1, k, q, e, v, o1, 0.7)
				kdaStepGeneric(S2, k, q, e, v, o2, 0.7)
			}
			for i := range o1 {
				require.InDelta(t, o2[i], o1[i], 1e-5*(1+math.Abs(float64(o2[i]))), "kdaStep dk=%d dv=%d o[%d]", dk, dv, i)
			}
			for i := range S1 {
				require.InDelta(t, S2[i], S1[i], 1e-5*(1+math.Abs(float64(S2[i]))), "kdaStep dk=%d dv=%d S[%d]", dk, dv, i)
			}
		}
	}
}
