package engine

import (
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/core/ref"
)

// TestGreedyTokensAcrossInt8Kernels decodes k3-micro exported to each
// block format tessera writes with every set of integer kernels this CPU
// has (ref.Int8Kernels). The AVX2 kernels give the VNNI kernels' bits, so
// their greedy tokens must be the same; the generic Go kernels (the
// browser's, and other CPUs') compute the same integer sums in another
// float32 order, which the next product's int8 rounding can turn into a
// different near-tied choice, so their agreement is logged, as the AMX
// kernels' (prefill with the generic kernels' bits) is (exact products,
// SetExact, are the way to the same tokens everywhere).
func TestGreedyTokensAcrossInt8Kernels(t *testing.T) {
	sets := ref.Int8Kernels()
	if !slices.Contains(sets, "vnni") || !slices.Contains(sets, "avx2") {
		t.Skipf("no two kernel sets with the same bits on this CPU (%v)", sets)
	}
	defer func() {
		if _, err := ref.SetInt8Kernels(sets[0]); err != nil {
			t.Error(err)
		}
	}()
	prompts := []string{"The quick brown fox", "Hello, tessera! Tell me a story about", "def fibonacci(n):"}
	for _, typ := range []string{"q4_0", "q4_k", "mxfp4", "q8_0"} {
		e, _ := microGGUF(t, typ)
		for _, p := range prompts {
			ids := map[string][]int{}
			for _, k := range sets {
				if _, err := ref.SetInt8Kernels(k); err != nil {
					t.Fatal(err)
				}
				ids[k] = greedyIDs(t, e, p, 64)
			}
			if !slices.Equal(ids["avx2"], ids["vnni"]) {
				t.Errorf("%s %q: greedy ids with the AVX2 kernels %v, with VNNI %v", typ, p, ids["avx2"], ids["vnni"])
			}
			for _, k := range sets {
				if k == "vnni" || k == "avx2" {
					continue
				}
				n := 0
				for n < len(ids[k]) && n < len(ids["vnni"]) && ids[k][n] == ids["vnni"][n] {
					n++
				}
				t.Logf("%s %q: the %s kernels agree with VNNI on %d of %d tokens", typ, p, k, n, len(ids["vnni"]))
			}
		}
	}
}
