//go:build cgo || js

package conformance

import (
	"math"
	"math/rand/v2"
	"testing"
)

// A non-finite value on either side fails any bound: a NaN from the CPU
// reference must not pass silently (NaN compares false with everything).
func TestNMSEFailsOnNonFinite(t *testing.T) {
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, tc := range []struct {
		name      string
		got, want []float32
		finite    bool
	}{
		{"equal", []float32{1, 2}, []float32{1, 2}, true},
		{"zero reference", []float32{0, 0}, []float32{0, 0}, true},
		{"NaN from the GPU", []float32{nan, 2}, []float32{1, 2}, false},
		{"NaN from the reference", []float32{1, 2}, []float32{nan, 2}, false},
		{"NaN on both sides", []float32{nan, 2}, []float32{nan, 2}, false},
		{"+Inf from the GPU", []float32{inf, 2}, []float32{1, 2}, false},
		{"-Inf from the reference", []float32{1, 2}, []float32{1, -inf}, false},
		{"length mismatch", []float32{1}, []float32{1, 2}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := NMSE(tc.got, tc.want)
			if tc.finite != (e <= 1e-10) {
				t.Errorf("NMSE = %v, want a passing value %v", e, tc.finite)
			}
			if !tc.finite && !math.IsInf(e, 1) {
				t.Errorf("NMSE = %v, want +Inf", e)
			}
		})
	}
}

// Run (the browser's harness) reports a case whose reference is NaN as
// failed.
func TestRunFailsOnNaNReference(t *testing.T) {
	nan := float32(math.NaN())
	c := Case{Op: "Fake", DType: "F32", Shape: "2", Bound: 1,
		Run: func(*GPU, *rand.Rand) ([]float32, []float32) { return []float32{1, 2}, []float32{nan, 2} }}
	if r := Run(c, nil, nil); r.OK {
		t.Fatalf("a NaN reference passed: %+v", r)
	}
	c.Run = func(*GPU, *rand.Rand) ([]float32, []float32) { return []float32{1, 2}, []float32{1, 2} }
	if r := Run(c, nil, nil); !r.OK {
		t.Fatalf("an exact case failed: %+v", r)
	}
}
