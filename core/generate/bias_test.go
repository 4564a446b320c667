package generate

import (
	"math"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/model"
)

func TestLogitBiasValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		bias  []TokenBias
		vocab int
		err   string
	}{
		{"none", nil, 4, ""},
		{"ban and boost", []TokenBias{{1, BanBias}, {2, 100}, {3, -0.5}}, 4, ""},
		{"negative id", []TokenBias{{-1, 1}}, 4, "token id -1 is negative"},
		{"below -100", []TokenBias{{1, -101}}, 4, "must be in [-100, 100], got -101"},
		{"above 100", []TokenBias{{1, 100.5}}, 4, "must be in [-100, 100]"},
		{"NaN", []TokenBias{{1, float32(math.NaN())}}, 4, "must be in [-100, 100], got NaN"},
		{"twice", []TokenBias{{2, 1}, {1, 1}, {2, -1}}, 4, "token 2 is listed twice"},
		{"outside the vocabulary", []TokenBias{{4, 1}}, 4, "token 4 is outside the vocabulary [0, 4)"},
		{"bans every token", []TokenBias{{0, BanBias}, {1, BanBias}, {2, -100}}, 3, "bans all 3 tokens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := SamplerOptions{LogitBias: tc.bias}.ValidateVocab(tc.vocab)
			if tc.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.err)
		})
	}
}

func TestLogitBiasSample(t *testing.T) {
	logits := func() []float32 { return []float32{1, 3, 2, -1, 3} }
	// a ban removes the argmax (1, then its tie 4); a boost lifts token 3
	ban := SamplerOptions{LogitBias: []TokenBias{{1, BanBias}, {4, BanBias}}}
	require.Equal(t, 2, NewSampler(ban, 5).Sample(logits(), nil))
	boost := SamplerOptions{LogitBias: []TokenBias{{3, 4.5}}}
	require.Equal(t, 3, NewSampler(boost, 5).Sample(logits(), nil))
	l := logits()
	ban.Bias(l)
	require.True(t, math.IsInf(float64(l[1]), -1))
	require.Equal(t, float32(2), l[2])
	// sampled: a banned token is never drawn; the draw reference agrees
	ban.Temperature, ban.Seed = 1.5, 9
	s := NewSampler(ban, 5)
	for i := range 300 {
		tok := s.Sample(logits(), nil)
		require.NotContains(t, []int{1, 4}, tok)
		require.NotContains(t, []int{1, 4}, s.SampleDraw(logits(), float64(i)/300))
	}
	// the bias comes before the repetition penalty: a boosted token seen
	// before is still divided
	pen := SamplerOptions{RepetitionPenalty: 2, LogitBias: []TokenBias{{3, 3}}}
	l = logits()
	NewSampler(pen, 5).Sample(l, []int{3})
	require.Equal(t, float32(1), l[3])
}

// A logit bias is applied the same on a device sampler (the first token
// after the prompt included) as on the host, and a generation with a bad
// bias fails before it starts.
func TestLogitBiasGeneration(t *testing.T) {
	m := presetModel(t, "k3-nano", 2, "F32")
	prompt := bytesOf("logit bias, please")
	greedy := collect(t, NewSession(model.NewRunner(m, model.Options{MaxChunk: 5}), 0), prompt, Options{MaxTokens: 12})
	var banned []TokenBias
	for _, id := range greedy {
		if !slices.Contains(banned, TokenBias{id, BanBias}) {
			banned = append(banned, TokenBias{id, BanBias})
		}
	}
	for _, so := range []SamplerOptions{{LogitBias: banned}, {Temperature: 0.9, TopK: 40, Seed: 5, LogitBias: banned}} {
		r := model.NewRunner(m, model.Options{MaxChunk: 5})
		want := collect(t, NewSession(r, 0), prompt, Options{MaxTokens: 12, Sampler: so})
		for _, id := range want {
			require.NotContains(t, banned, TokenBias{id, BanBias}, "T=%g: banned token %d sampled", so.Temperature, id)
		}
		f := &fakeDevice{cpuBackend: cpuBackend{r: r, st: m.NewState()}, logits: make([]float32, m.Cfg.VocabSize),
			smp: NewSampler(so, m.Cfg.VocabSize)}
		require.Equal(t, want, collect(t, NewSessionOn(f, 0), prompt, Options{MaxTokens: 12, Sampler: so}), "T=%g", so.Temperature)
		require.Equal(t, 13, f.samples)
	}
	bad := Options{MaxTokens: 4, Vocab: 200, Sampler: SamplerOptions{LogitBias: []TokenBias{{200, 1}}}}
	n := 0
	for tok, err := range NewSession(model.NewRunner(m, model.Options{}), 0).Generate(prompt, bad) {
		require.Equal(t, -1, tok)
		require.ErrorContains(t, err, "token 200 is outside the vocabulary [0, 200)")
		n++
	}
	require.Equal(t, 1, n, "one error, no tokens")
}
