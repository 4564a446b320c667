package generate

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// presetModel is what `tessera init-random --config NAME --seed SEED` writes.
func presetModel(t testing.TB, name string, seed uint64, dt safetensors.DType) *model.Model {
	t.Helper()
	raw, err := presets.Read(name)
	require.NoError(t, err)
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, model.RandomTensors(cfg, seed, dt), nil))
	ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": buf.Bytes()}))
	require.NoError(t, err)
	m, err := model.Load(cfg, ck)
	require.NoError(t, err)
	return m
}

func collect(t *testing.T, s *Session, prompt []int, opt Options) []int {
	var out []int
	for tok, err := range s.Generate(prompt, opt) {
		require.NoError(t, err)
		out = append(out, tok)
	}
	return out
}

func bytesOf(s string) []int {
	ids := make([]int, len(s))
	for i := range s {
		ids[i] = int(s[i])
	}
	return ids
}

// The greedy continuation of k3-nano seed 1 is pinned: any change to the
// numerics of the engine shows up here.
func TestGoldenGreedyTokens(t *testing.T) {
	m := presetModel(t, "k3-nano", 1, "F32")
	want := []int{18, 0, 306, 294, 141, 306, 294, 20, 328, 114, 337, 183, 353, 454, 281, 260}
	for _, chunk := range []int{64, 5, 1} {
		r := model.NewRunner(m, model.Options{MaxChunk: chunk})
		got := collect(t, NewSession(r, 0), bytesOf("Hello, tessera!"), Options{MaxTokens: 16})
		r.Close()
		require.Equal(t, want, got, "chunk %d", chunk)
	}
}

func TestSampledGenerationIsSeeded(t *testing.T) {
	m := presetModel(t, "kimi-linear-nano", 2, "BF16")
	run := func(seed uint64) []int {
		r := model.NewRunner(m, model.Options{})
		defer r.Close()
		return collect(t, NewSession(r, 0), []int{1, 2, 3}, Options{MaxTokens: 24,
			Sampler: SamplerOptions{Temperature: 1.5, TopP: 0.95, TopK: 100, Seed: seed}})
	}
	a, b, c := run(7), run(7), run(8)
	require.Equal(t, a, b)
	require.NotEqual(t, a, c)
	require.Len(t, a, 24)
}

func TestStopAndLimits(t *testing.T) {
	m := presetModel(t, "k3-nano", 1, "F32")
	r := model.NewRunner(m, model.Options{})
	defer r.Close()
	// The greedy continuation starts 18, 0: making 18 a stop token ends
	// generation at once.
	require.Empty(t, collect(t, NewSession(r, 0), bytesOf("Hello, tessera!"), Options{MaxTokens: 16, Stop: []int{18}}))
	got := collect(t, NewSession(r, 0), bytesOf("Hello, tessera!"), Options{MaxTokens: 16, Stop: []int{0}})
	require.Equal(t, []int{18}, got)

	m.Cfg.MaxPositions = 10
	var err error
	for _, e := range NewSession(r, 0).Generate(make([]int, 11), Options{}) {
		err = e
	}
	require.ErrorIs(t, err, ErrContext)
	// Generation stops at the end of the context.
	got = collect(t, NewSession(r, 0), make([]int, 8), Options{})
	require.Len(t, got, 3) // positions 8, 9 and the token after the last fed one
	m.Cfg.MaxPositions = 1 << 20
	for _, e := range NewSession(r, 0).Generate([]int{1}, Options{Sampler: SamplerOptions{TopP: 2}}) {
		err = e
	}
	require.ErrorContains(t, err, "top-p must be in [0, 1]")
}

func TestSampler(t *testing.T) {
	logits := func() []float32 { return []float32{1, 3, 2, -1, 3} }
	require.Equal(t, 1, Argmax(logits()))
	require.Equal(t, 1, NewSampler(SamplerOptions{}, 5).Sample(logits(), nil))
	// Top-k 1 is greedy whatever the temperature.
	s := NewSampler(SamplerOptions{Temperature: 5, TopK: 1, Seed: 3}, 5)
	for i := 0; i < 20; i++ {
		require.Equal(t, 1, s.Sample(logits(), nil))
	}
	// Repetition penalty: 3/4 < 2 moves the argmax away from token 1 and 4.
	s = NewSampler(SamplerOptions{RepetitionPenalty: 4}, 5)
	require.Equal(t, 2, s.Sample(logits(), []int{1, 4, 1}))
	l := []float32{-1, 0.5}
	NewSampler(SamplerOptions{RepetitionPenalty: 2}, 2).Sample(l, []int{0})
	require.Equal(t, float32(-2), l[0])
	// Min-p 0.5 keeps only tokens within a factor 2 of the best: 1 and 4.
	s = NewSampler(SamplerOptions{Temperature: 1, MinP: 0.5, Seed: 1}, 5)
	counts := map[int]int{}
	for i := 0; i < 400; i++ {
		counts[s.Sample(logits(), nil)]++
	}
	require.Equal(t, 2, len(counts))
	require.InDelta(t, 200, counts[1], 60)
	// Top-p: p(1)=p(4)≈0.397, p(2)≈0.146: top-p 0.75 keeps {1,4}.
	s = NewSampler(SamplerOptions{Temperature: 1, TopP: 0.75, Seed: 2}, 5)
	counts = map[int]int{}
	for i := 0; i < 400; i++ {
		counts[s.Sample(logits(), nil)]++
	}
	require.Len(t, counts, 2)
	// Plain temperature sampling follows the softmax.
	s = NewSampler(SamplerOptions{Temperature: 1, Seed: 4}, 5)
	counts = map[int]int{}
	const n = 20000
	for i := 0; i < n; i++ {
		counts[s.Sample(logits(), nil)]++
	}
	var z float64
	for _, v := range logits() {
		z += math.Exp(float64(v))
	}
	require.InDelta(t, math.Exp(2)/z, float64(counts[2])/n, 0.015)
	require.InDelta(t, math.Exp(-1)/z, float64(counts[3])/n, 0.01)
}

func TestSelectTop(t *testing.T) {
	for n := 1; n < 40; n++ {
		for k := 1; k <= n; k++ {
			c := make([]cand, n)
			for i := range c {
				c[i] = cand{int32(i), float32((i * 7919) % 13)}
			}
			selectTop(c, k)
			minTop := c[0].v
			for _, x := range c[:k] {
				minTop = min(minTop, x.v)
			}
			for _, x := range c[k:] {
				require.LessOrEqual(t, x.v, minTop)
			}
		}
	}
}

// Decoding a token allocates nothing: all state and scratch exist up front.
func TestDecodeStepAllocatesNothing(t *testing.T) {
	for _, name := range []string{"k3-nano", "kimi-linear-nano", "qwen3-next-nano", "deepseek-v3-nano"} {
		m := presetModel(t, name, 1, "BF16")
		r := model.NewRunner(m, model.Options{})
		s := NewSession(r, 300)
		require.NoError(t, s.Prefill([]int{1, 2, 3, 4, 5}))
		smp := NewSampler(SamplerOptions{Temperature: 0.8, TopK: 40, TopP: 0.9, RepetitionPenalty: 1.1, Seed: 1}, m.Cfg.VocabSize)
		tok := 1
		allocs := testing.AllocsPerRun(100, func() {
			if err := s.Step(tok); err != nil {
				t.Fatal(err)
			}
			tok = smp.Sample(s.Logits(), s.history)
		})
		require.Zero(t, allocs, name)
		r.Close()
	}
}

// A cloned and restored state continues exactly like the original.
func TestRestoreClone(t *testing.T) {
	m := presetModel(t, "k3-nano", 1, "F32")
	r := model.NewRunner(m, model.Options{})
	defer r.Close()
	s := NewSession(r, 0)
	prompt := bytesOf("shared prefix")
	require.NoError(t, s.Prefill(prompt))
	snap := s.State().(*model.State).Clone()
	a := collect(t, s, []int{5}, Options{MaxTokens: 6})
	require.NoError(t, s.Restore(snap.Clone(), prompt))
	b := collect(t, s, []int{5}, Options{MaxTokens: 6})
	require.Equal(t, a, b)
	fresh := NewSession(r, 0)
	c := collect(t, fresh, append(append([]int(nil), prompt...), 5), Options{MaxTokens: 6})
	require.Equal(t, a, c)
}

// Every emitted token is fed back: History is prompt + output, so a
// conversation continues from exactly what was shown.
func TestHistoryCoversOutput(t *testing.T) {
	m := presetModel(t, "k3-nano", 1, "F32")
	r := model.NewRunner(m, model.Options{})
	defer r.Close()
	s := NewSession(r, 0)
	prompt := bytesOf("Hello, tessera!")
	out := collect(t, s, prompt, Options{MaxTokens: 5})
	require.Len(t, out, 5)
	require.Equal(t, append(append([]int(nil), prompt...), out...), s.History())
	require.Equal(t, len(prompt)+5, s.State().Pos())
	// A stop token is neither emitted nor fed.
	s2 := NewSession(r, 0)
	out = collect(t, s2, prompt, Options{MaxTokens: 16, Stop: []int{0}})
	require.Equal(t, []int{18}, out)
	require.Equal(t, len(prompt)+1, s2.State().Pos())
}
