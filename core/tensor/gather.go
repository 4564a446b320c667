package tensor

import "fmt"

// GatherRows returns a new matrix whose rows are the spans of m's rows
// listed in spans ([lo, hi) each), in that order: a one-time regrouping of
// a checkpoint matrix whose rows are interleaved by group (Qwen3-Next's
// in_proj_qkvz, q_proj) into contiguous blocks. The data is copied; a
// deferred m gives a deferred result that gathers when fetched.
func (m *Mat) GatherRows(spans [][2]int) *Mat {
	n := 0
	for _, s := range spans {
		n += s[1] - s[0]
	}
	if m.Deferred() {
		return &Mat{Rows: n, Cols: m.Cols, DType: m.DType, Fetch: func() (*Mat, error) {
			r, err := m.Resolve()
			if err != nil {
				return nil, err
			}
			return r.GatherRows(spans), nil
		}}
	}
	g := &Mat{Rows: n, Cols: m.Cols, DType: m.DType}
	for _, s := range spans {
		if s[0] < 0 || s[1] > m.Rows || s[0] > s[1] {
			panic(fmt.Sprintf("tensor: GatherRows span %v of %d rows", s, m.Rows))
		}
		p := m.SliceRows(s[0], s[1])
		g.F32 = append(g.F32, p.F32...)
		g.U16 = append(g.U16, p.U16...)
		g.I8 = append(g.I8, p.I8...)
		g.Scale = append(g.Scale, p.Scale...)
		g.Q = append(g.Q, p.Q...)
	}
	return g
}
