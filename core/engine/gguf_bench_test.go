package engine

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/ref"
)

// BenchmarkGGUFDecode times greedy decode of k3-micro exported to each
// block format, on the integer path (int8=true: activations rounded to
// int8 per block, the default) and on the float32 path over the
// dequantized weights (int8=false: exact products, SetExact), reporting
// decode tok/s (the time from the first token to the last). It runs
// under GOOS=js too (scripts/wasm/exec.sh), the browser's CPU path.
func BenchmarkGGUFDecode(b *testing.B) {
	const n = 32
	for _, typ := range []string{"q4_k", "mxfp4", "q8_0"} {
		e, _ := microGGUF(b, typ)
		for _, int8 := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/int8=%v", typ, int8), func(b *testing.B) {
				was := ref.SetInt8Activations(int8)
				defer ref.SetInt8Activations(was)
				var decode time.Duration
				for b.Loop() {
					var first time.Time
					k := 0
					if _, err := e.Generate(context.Background(), Options{Prompt: "Hello, tessera!", MaxTokens: n, NoCache: true},
						func(Piece) bool {
							if k++; k == 1 {
								first = time.Now()
							}
							return true
						}); err != nil {
						b.Fatal(err)
					}
					decode += time.Since(first)
				}
				b.ReportMetric(float64(b.N*(n-1))/decode.Seconds(), "tok/s")
			})
		}
	}
}
