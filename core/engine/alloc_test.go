package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
)

// Decoding a token of a block-format GGUF model on the CPU allocates
// nothing, as for safetensors weights (generate's
// TestDecodeStepAllocatesNothing): the integer GEMVs' last rows that make
// no group of four used to allocate their 4-float result each call. The
// pool has one worker and two, whose chunks end at other rows.
func TestDecodeAllocatesNothingGGUF(t *testing.T) {
	for _, typ := range []string{"q8_0", "q4_k"} {
		e, _ := microGGUF(t, typ)
		for _, workers := range []int{1, 2} {
			r := model.NewRunner(e.Model, model.Options{MaxChunk: 64, Workers: workers})
			s := generate.NewSession(r, 200)
			require.NoError(t, s.Prefill([]int{1, 2, 3, 4, 5}))
			tok := 7
			allocs := testing.AllocsPerRun(20, func() {
				if err := s.Step(tok); err != nil {
					t.Fatal(err)
				}
				tok = generate.Argmax(s.Logits())
			})
			require.Zero(t, allocs, "%s, %d workers", typ, workers)
			r.Close()
		}
	}
}
