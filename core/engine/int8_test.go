package engine

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// TestGreedyTokensAcrossInt8Kernels: k3-micro exported to each block
// format tessera writes decodes the same greedy tokens with every set of
// integer kernels this CPU has (ref.Int8Kernels: AVX-512 VNNI, AVX2, the
// generic Go ones of the browser and of other CPUs).
func TestGreedyTokensAcrossInt8Kernels(t *testing.T) {
	sets := ref.Int8Kernels()
	if len(sets) < 2 {
		t.Skipf("one set of integer kernels on this CPU (%v)", sets)
	}
	defer func() {
		if _, err := ref.SetInt8Kernels(sets[0]); err != nil {
			t.Error(err)
		}
	}()
	for _, typ := range []string{"q4_0", "q4_k", "mxfp4", "q8_0"} {
		path := filepath.Join(t.TempDir(), "k3-micro."+typ+".gguf")
		if err := gguf.Export(microDir, path, gguf.ExportOptions{Type: typ}); err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		e, err := LoadGGUF(safetensors.BytesSource(data), false)
		if err != nil {
			t.Fatal(err)
		}
		var want []int
		for _, k := range sets {
			if _, err := ref.SetInt8Kernels(k); err != nil {
				t.Fatal(err)
			}
			got := greedyIDs(t, e, "The quick brown fox", 32)
			if want == nil {
				want = got
			} else if !slices.Equal(got, want) {
				t.Errorf("%s: greedy ids with the %s kernels %v, with %s %v", typ, k, got, sets[0], want)
			}
		}
		e.Close()
	}
}
