package generate

import (
	"fmt"
	"testing"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
)

var benchModels = map[string]*model.Model{}

func benchModel(b *testing.B, name string) *model.Model {
	if m, ok := benchModels[name]; ok {
		return m
	}
	if name == "k3-mini" && testing.Short() {
		b.Skip("k3-mini (0.5 B parameters) is skipped in -short mode")
	}
	dt := safetensors.DType("F32")
	if name == "k3-mini" {
		dt = "BF16"
	}
	m := presetModel(b, name, 1, dt)
	benchModels[name] = m
	return m
}

// weightBytesPerToken is the weight traffic of one decode step.
func weightBytesPerToken(m *model.Model) float64 {
	s := model.ComputeStats(m.Cfg)
	per := 4.0
	if m.Layers[0].KDA != nil && m.Layers[0].KDA.QProj.DType != 0 {
		per = 2
	}
	return float64(s.DecodeReadParams) * per
}

// BenchmarkDecode measures one decoded token at a context of 64–320
// tokens: tokens/s, effective GB/s of weights read, and allocations
// (must be 0).
func BenchmarkDecode(b *testing.B) {
	for _, name := range []string{"k3-nano", "k3-mini"} {
		b.Run(name, func(b *testing.B) {
			m := benchModel(b, name)
			r := model.NewRunner(m, model.Options{})
			defer r.Close()
			s := NewSession(r, 64+b.N+1)
			prompt := make([]int, 64)
			for i := range prompt {
				prompt[i] = (i * 31) % m.Cfg.VocabSize
			}
			if err := s.Prefill(prompt); err != nil {
				b.Fatal(err)
			}
			start := s.State().(*model.State).Clone()
			b.ReportAllocs()
			b.ResetTimer()
			tok := 1
			for i := 0; i < b.N; i++ {
				if s.State().Pos() >= 64+256 { // keep the context short and fixed
					b.StopTimer()
					if err := s.Restore(start.Clone(), prompt); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
				}
				if err := s.Step(tok); err != nil {
					b.Fatal(err)
				}
				tok = Argmax(s.Logits())
			}
			sec := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/sec, "tok/s")
			b.ReportMetric(weightBytesPerToken(m)*float64(b.N)/sec/1e9, "GB/s")
		})
	}
}

// BenchmarkPrefill measures prefill throughput in pieces of 64 tokens.
func BenchmarkPrefill(b *testing.B) {
	for _, name := range []string{"k3-nano", "k3-mini"} {
		for _, T := range []int{64, 512} {
			b.Run(fmt.Sprintf("%s/T=%d", name, T), func(b *testing.B) {
				m := benchModel(b, name)
				r := model.NewRunner(m, model.Options{MaxChunk: 64})
				defer r.Close()
				prompt := make([]int, T)
				for i := range prompt {
					prompt[i] = (i * 31) % m.Cfg.VocabSize
				}
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					s := NewSession(r, T)
					if err := s.Prefill(prompt); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(T*b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}
