//go:build cgo && !js

package wgsl_test

import (
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
	"github.com/tessera-llm/tessera/wgsl/conformance"
)

// TestMLADecodeDispatches: a decoded token's absorbed MLA with its own
// row appended (MLAAbsorbed with New) records absorb_prep and absorb_attn
// while the context is one 128-key split, then absorb_out too, one more
// absorb_attn per further cache page, and absorb_combine only when the
// merge does not fit absorb_out's loop budget. (Conformance checks the
// values of every path.)
func TestMLADecodeDispatches(t *testing.T) {
	d := device(t)
	const H, DN, DR, DV, RKV = 2, 16, 8, 12, 40
	r := rand.New(rand.NewPCG(1, 2))
	g := conformance.NewGPU(t, d)
	defer g.Release()
	W := g.Mat(conformance.RandMat(r, H*(DN+DV), RKV, tensor.F32, 0.5))
	q, o := g.Up(conformance.RandVec(r, H*(DN+DR), 1)), g.Zeros(H*DV)
	row, nu := g.Up(conformance.RandVec(r, RKV+DR, 1)), g.Up(conformance.RandVec(r, RKV, 1))
	for _, tc := range []struct {
		pos0, pageRows int
		separateMerge  bool
		want           int
	}{
		{0, 128, false, 2},
		{127, 128, false, 2},
		{128, 256, false, 3},
		{300, 384, false, 3},
		{300, 128, false, 5},
		{300, 384, true, 4},
	} {
		c, err := d.NewPagedLatentCache(RKV+DR, tc.pos0+1, tc.pageRows)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.AppendHost(conformance.RandVec(r, tc.pos0*(RKV+DR), 1)); err != nil {
			t.Fatal(err)
		}
		restore := func() {}
		if tc.separateMerge {
			restore = wgsl.SetMLAMergeBudgetForTest(0)
		}
		d0 := d.Dispatches
		err = d.MLAAbsorbed(&wgsl.MLAArgs{N: 1, H: H, DN: DN, DR: DR, DV: DV, RKV: RKV, Pos0: tc.pos0, Scale: 0.3, Q: q, WKVB: W,
			Cache: c, O: o, New: row.Rows(RKV + DR), Norm: nu, Eps: 1e-6})
		restore()
		if err != nil {
			t.Fatal(err)
		}
		if got := d.Dispatches - d0; got != tc.want {
			t.Errorf("context %d, pages of %d rows, separate merge %v: %d dispatches, want %d", tc.pos0+1, tc.pageRows, tc.separateMerge, got, tc.want)
		}
		if c.Len != tc.pos0+1 {
			t.Errorf("context %d: the cache holds %d rows after the append", tc.pos0+1, c.Len)
		}
		if err := d.Sync(); err != nil {
			t.Fatal(err)
		}
		c.Release()
	}
}
