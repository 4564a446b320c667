package tensor

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGatherRows(t *testing.T) {
	m := NewF32(4, 2, []float32{0, 1, 10, 11, 20, 21, 30, 31})
	g := m.GatherRows([][2]int{{2, 4}, {0, 1}})
	require.Equal(t, []float32{20, 21, 30, 31, 0, 1}, g.F32)
	require.Equal(t, 3, g.Rows)
	q := Quantize(m).GatherRows([][2]int{{3, 4}})
	require.Equal(t, []float32{30, 31}, roundRow(q.Row(0, make([]float32, 2))))
	d := &Mat{Rows: 4, Cols: 2, DType: F32, Fetch: func() (*Mat, error) { return m, nil }}
	dg := d.GatherRows([][2]int{{1, 2}})
	require.True(t, dg.Deferred())
	r, err := dg.Resolve()
	require.NoError(t, err)
	require.Equal(t, []float32{10, 11}, r.F32)
}

func roundRow(x []float32) []float32 {
	for i, v := range x {
		x[i] = float32(int(v + 0.5))
	}
	return x
}
