package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// e2m1 are the OCP FP4 E2M1 values of the 16 codes (bit 3 the sign).
var e2m1 = [16]float64{0, 0.5, 1, 1.5, 2, 3, 4, 6, 0, -0.5, -1, -1.5, -2, -3, -4, -6}

// TestMXFP4PackedLayout: a compressed-tensors matrix converted to ggml
// blocks dequantizes to the format's own definition, value(r, c) =
// E2M1(code of column c) · 2^(scale(r, c/32) − 127), bit for bit, for
// every code and every scale byte; converting back gives the same bytes.
func TestMXFP4PackedLayout(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 1))
	rows, cols := 256, 64
	packed, scale := make([]byte, rows*cols/2), make([]byte, rows*cols/32)
	for i := range packed {
		packed[i] = byte(rng.IntN(256))
	}
	for i := range scale {
		scale[i] = byte(i) // every exponent once
	}
	blocks, err := MXFP4FromPacked(packed, scale, rows, cols)
	require.NoError(t, err)
	got := make([]float32, rows*cols)
	Dequantize(MXFP4, got, blocks)
	for r := range rows {
		for c := range cols {
			b := packed[(r*cols+c)/2]
			code := b & 15
			if c%2 == 1 {
				code = b >> 4
			}
			want := float32(e2m1[code] * math.Pow(2, float64(int(scale[(r*cols+c)/32])-127)))
			require.Equal(t, math.Float32bits(want), math.Float32bits(got[r*cols+c]), "row %d col %d (code %d, scale %d)", r, c, code, scale[(r*cols+c)/32])
		}
	}
	p2, s2, err := MXFP4ToPacked(blocks, rows, cols)
	require.NoError(t, err)
	require.Equal(t, packed, p2)
	require.Equal(t, scale, s2)
}

func TestMXFP4PackedRefusesBadSizes(t *testing.T) {
	for _, c := range []struct {
		np, ns, rows, cols int
		msg                string
	}{
		{32, 2, 2, 32, ""},
		{31, 2, 2, 32, "packed bytes"},
		{32, 1, 2, 32, "scales"},
		{24, 2, 2, 24, "multiple of 32"},
	} {
		_, err := MXFP4FromPacked(make([]byte, c.np), make([]byte, c.ns), c.rows, c.cols)
		if c.msg == "" {
			require.NoError(t, err)
			continue
		}
		require.ErrorContains(t, err, c.msg)
	}
	_, _, err := MXFP4ToPacked(make([]byte, 33), 1, 64)
	require.ErrorContains(t, err, "want 34")
}
