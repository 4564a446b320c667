package model

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
)

// plain is the CPU backend without its fused capabilities (LinearBatch,
// the whole MoE op, traces, profiles): the forward pass then runs nn's
// unfused fallbacks.
type plain struct{ nn.Backend }

// Every fused capability equals its fallback: the same model over the CPU
// backend with and without its capabilities gives the same logits, for
// prefill pieces and decoded tokens, with Block AttnRes and without.
func TestFallbacksEqualFused(t *testing.T) {
	for _, tc := range []struct {
		preset string
		layout config.Layout
	}{{"k3-nano", config.LayoutKimiLinear}, {"kimi-linear-nano", config.LayoutKimiLinear},
		{"qwen3-next-nano", config.LayoutQwen3Next}, {"deepseek-v3-nano", config.LayoutDeepSeekV3}} {
		t.Run(tc.preset, func(t *testing.T) {
			m := randomModel(t, tc.preset, tc.layout, "F32", 3)
			_, isPlain := any(plain{}).(nn.MoEer)
			require.False(t, isPlain, "plain must hide the capabilities")
			run := func(hide bool) []float32 {
				r := NewRunner(m, Options{MaxChunk: 16})
				defer r.Close()
				if hide {
					r.graph = m.Build(plain{r.b}, r.Opt.MaxChunk)
				}
				st := m.NewState()
				V := m.Cfg.VocabSize
				var out []float32
				logits := make([]float32, 13*V)
				require.NoError(t, r.Forward(st, testIDs(13, V), logits))
				out = append(out, logits...)
				for i := 0; i < 3; i++ {
					require.NoError(t, r.Forward(st, []int{7 + i}, logits[:V]))
					out = append(out, logits[:V]...)
				}
				return out
			}
			fused, unfused := run(false), run(true)
			e := relErr(fused, unfused)
			require.Less(t, e, 1e-5, fmt.Sprintf("fused vs fallback: max relative error %.2e", e))
		})
	}
}
