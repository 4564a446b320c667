package generate

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/model"
)

// fakeDevice is a CPU backend that "samples on the device": SampleNext
// runs the piece and picks with SampleDraw from logits the session never
// sees. It counts the pieces that returned logits and those sampled.
type fakeDevice struct {
	cpuBackend
	logits            []float32
	smp               *Sampler
	forwards, samples int
	embSamples        int
}

func (f *fakeDevice) Forward(tokens []int, logits []float32) error {
	f.forwards++
	return f.cpuBackend.Forward(tokens, logits)
}

func (f *fakeDevice) ForwardEmbeddings(emb []float32, T int, logits []float32) error {
	f.forwards++
	return f.cpuBackend.ForwardEmbeddings(emb, T, logits)
}

func (f *fakeDevice) SamplesOnDevice(SamplerOptions, int) bool { return true }

func (f *fakeDevice) SampleNext(tokens []int, opt SamplerOptions, vocab int, u float64) (int, error) {
	f.samples++
	if err := f.cpuBackend.Forward(tokens, f.logits); err != nil {
		return 0, err
	}
	return f.smp.SampleDraw(f.logits[:vocab], u), nil
}

func (f *fakeDevice) SampleNextEmbeddings(emb []float32, T int, opt SamplerOptions, vocab int, u float64) (int, error) {
	f.embSamples++
	if err := f.cpuBackend.ForwardEmbeddings(emb, T, f.logits); err != nil {
		return 0, err
	}
	return f.smp.SampleDraw(f.logits[:vocab], u), nil
}

// On a DeviceSampler backend every token is picked on the device, the
// first after the prompt included: only the prompt pieces before the last
// return logits, and the tokens (greedy and seeded) are the host
// sampler's.
func TestDeviceSamplingIncludesFirstToken(t *testing.T) {
	m := presetModel(t, "k3-nano", 2, "F32")
	prompt := bytesOf("device sampling!") // 16 tokens: pieces of 5 → 4 pieces
	for _, so := range []SamplerOptions{{}, {Temperature: 0.9, TopK: 40, TopP: 0.95, Seed: 5}} {
		r := model.NewRunner(m, model.Options{MaxChunk: 5})
		want := collect(t, NewSession(r, 0), prompt, Options{MaxTokens: 12, Sampler: so})
		f := &fakeDevice{cpuBackend: cpuBackend{r: r, st: m.NewState()}, logits: make([]float32, m.Cfg.VocabSize),
			smp: NewSampler(so, m.Cfg.VocabSize)}
		got := collect(t, NewSessionOn(f, 0), prompt, Options{MaxTokens: 12, Sampler: so})
		require.Equal(t, want, got, "%+v", so)
		require.Equal(t, 3, f.forwards, "prompt pieces that returned logits")
		require.Equal(t, 13, f.samples, "1 for the last prompt piece + 12 emitted tokens fed back")

		// the embeddings path: the last piece through SampleNextEmbeddings
		emb := make([]float32, len(prompt)*m.Cfg.HiddenSize)
		for i, id := range prompt {
			copy(emb[i*m.Cfg.HiddenSize:], m.EmbedTokens.Row(id, nil))
		}
		f = &fakeDevice{cpuBackend: cpuBackend{r: r, st: m.NewState()}, logits: make([]float32, m.Cfg.VocabSize),
			smp: NewSampler(so, m.Cfg.VocabSize)}
		var out []int
		for tok, err := range NewSessionOn(f, 0).GenerateEmbedded(prompt, emb, Options{MaxTokens: 12, Sampler: so}) {
			require.NoError(t, err)
			out = append(out, tok)
		}
		require.Equal(t, want, out, "embedded %+v", so)
		require.Equal(t, 1, f.embSamples)
		require.Equal(t, 3, f.forwards)
		r.Close()
	}
}

// penaltyCases are repetition penalties on both sides of the rule
// (SamplerOptions.Penalizes): 0 and 1 are off, anything else positive on.
var penaltyCases = []struct {
	p    float32
	want bool
}{{0, false}, {1, false}, {0.5, true}, {1.3, true}, {4, true}}

// The host sampler applies a repetition penalty exactly when Penalizes
// says so, and the session then samples on the host even on a device
// sampler (wgsl's TestSamplesOnDeviceRepetitionRule checks the GPU's side).
func TestRepetitionPenaltyRule(t *testing.T) {
	m := presetModel(t, "k3-nano", 2, "F32")
	prompt := bytesOf("penalty rule")
	for _, tc := range penaltyCases {
		so := SamplerOptions{RepetitionPenalty: tc.p}
		require.Equal(t, tc.want, so.Penalizes(), "penalty %g", tc.p)
		l := []float32{2, -2, 1}
		NewSampler(so, 3).Sample(l, []int{0, 1})
		require.Equal(t, tc.want, l[0] != 2 || l[1] != -2, "penalty %g applied on the host", tc.p)

		r := model.NewRunner(m, model.Options{MaxChunk: 8})
		f := &fakeDevice{cpuBackend: cpuBackend{r: r, st: m.NewState()}, logits: make([]float32, m.Cfg.VocabSize),
			smp: NewSampler(so, m.Cfg.VocabSize)}
		collect(t, NewSessionOn(f, 0), prompt, Options{MaxTokens: 4, Sampler: so})
		require.Equal(t, tc.want, f.samples == 0, "penalty %g: sampled on the device %d times", tc.p, f.samples)
	}
}
