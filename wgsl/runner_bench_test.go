//go:build cgo && !js

package wgsl_test

import (
	"os"
	"testing"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/wgsl"
)

// BenchmarkRunnerDecode measures greedy decoding on the GPU, one token per
// iteration (one command buffer, one 4-byte readback), after a 32-token
// prefill: "off" plain, "live" with the live routing/state view attached
// (routing, KDA norm partials and the token read back together: what the
// desktop and the page pay for it), "repeating" with the decode fusions
// that repeat work per workgroup on, as a GPU runs them
// (Device.SetRepeatFusions; software adapters skip them by default). The model is a random preset
// built in memory: TESSERA_BENCH_PRESET (default k3-nano; k3-mini on a
// real GPU) in TESSERA_BENCH_DTYPE (default BF16). Reports tokens/s and
// dispatches/token.
func BenchmarkRunnerDecode(b *testing.B) {
	d := device(b)
	name, dt, m := benchModel(b)
	for _, mode := range []string{"off", "live", "repeating"} {
		live := mode == "live"
		b.Run(mode, func(b *testing.B) {
			if mode == "repeating" { // the repeating fusions on, as on a GPU
				defer d.SetRepeatFusions(true, 0)()
			}
			ctx := 32 + b.N + 1
			r, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 32, MaxContext: max(ctx, 64)})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			prompt := make([]int, 32)
			for i := range prompt {
				prompt[i] = (i*97 + 13) % m.Cfg.VocabSize
			}
			tok, err := r.Greedy(prompt)
			if err != nil {
				b.Fatal(err)
			}
			norms := make([]float64, m.Cfg.NumHiddenLayers)
			if live {
				if err := r.SetRouteHook(func(int, []int, int, int) {}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if tok, err = r.Greedy([]int{tok}); err != nil {
					b.Fatal(err)
				}
				if live {
					if err := r.KDANorms(norms); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.StopTimer()
			s := r.Stats()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			b.ReportMetric(float64(s.Dispatches), "dispatches/tok")
			b.Logf("%s %s on %s: %d dispatches, %d submits per token (live view %v)", name, dt, d.Info(), s.Dispatches, s.Submits, live)
		})
	}
}

// BenchmarkRunnerPrefill measures one 64-token prefill piece on the GPU
// (TESSERA_BENCH_PRESET, TESSERA_BENCH_DTYPE as above), with the routed
// experts grouped by expert (default) and per (token, slot).
func BenchmarkRunnerPrefill(b *testing.B) {
	d := device(b)
	_, _, m := benchModel(b)
	const T = 64
	prompt := make([]int, T)
	for i := range prompt {
		prompt[i] = (i*97 + 13) % m.Cfg.VocabSize
	}
	for _, grouped := range []bool{true, false} {
		b.Run(map[bool]string{true: "grouped", false: "per-slot"}[grouped], func(b *testing.B) {
			defer wgsl.SetGroupExpertsForTest(grouped)()
			r, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: T, MaxContext: T})
			if err != nil {
				b.Fatal(err)
			}
			defer r.Close()
			for i := 0; i < b.N; i++ {
				if err := r.Reset(); err != nil {
					b.Fatal(err)
				}
				if _, err := r.Greedy(prompt); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N*T)/b.Elapsed().Seconds(), "tok/s")
		})
	}
}

// benchModel is the random preset the runner benchmarks use:
// TESSERA_BENCH_PRESET (default k3-nano) in TESSERA_BENCH_DTYPE (default
// BF16), built in memory.
func benchModel(b *testing.B) (name, dt string, m *model.Model) {
	name, dt = os.Getenv("TESSERA_BENCH_PRESET"), os.Getenv("TESSERA_BENCH_DTYPE")
	if name == "" {
		name = "k3-nano"
	}
	if dt == "" {
		dt = "BF16"
	}
	return name, dt, presetModel(b, name, 1, safetensors.DType(dt))
}
