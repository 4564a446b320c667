package engine

import (
	"bytes"
	"context"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// The browser engine loads the qwen3_next and deepseek_v3 families as
// init-random writes them and generates the native CPU runner's greedy
// tokens (up to the config's end-of-sequence id).
func TestFamiliesGreedyMatchNative(t *testing.T) {
	for _, name := range []string{"qwen3-next-nano", "deepseek-v3-nano"} {
		t.Run(name, func(t *testing.T) {
			raw, err := presets.Read(name)
			if err != nil {
				t.Fatal(err)
			}
			cfg, err := config.Parse(raw)
			if err != nil {
				t.Fatal(err)
			}
			js, err := cfg.Marshal(cfg.Layout)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := safetensors.Write(&buf, model.RandomTensors(cfg, 1, "F32"), nil); err != nil {
				t.Fatal(err)
			}
			files := map[string][]byte{ConfigFile: js, safetensors.SingleFileName: buf.Bytes()}
			e, err := Load(safetensors.MemOpener(files))
			if err != nil {
				t.Fatal(err)
			}
			defer e.Close()
			prompt := []int{1, 72, 101, 108, 108, 111}
			var got []int
			if _, err := e.Generate(context.Background(), Options{Tokens: prompt, MaxTokens: 8}, func(p Piece) bool {
				got = append(got, p.ID)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			ck, err := safetensors.Open(safetensors.MemOpener(files))
			if err != nil {
				t.Fatal(err)
			}
			m, err := model.Load(cfg, ck)
			if err != nil {
				t.Fatal(err)
			}
			r := model.NewRunner(m, model.Options{})
			defer r.Close()
			s := generate.NewSession(r, 64)
			if err := s.Prefill(prompt); err != nil {
				t.Fatal(err)
			}
			var want []int
			for len(want) < 8 {
				tok := generate.Argmax(s.Logits())
				if slices.Contains(cfg.EOSTokenIDs, tok) { // the engine stops there
					break
				}
				want = append(want, tok)
				if err := s.Step(tok); err != nil {
					t.Fatal(err)
				}
			}
			if !slices.Equal(got, want) {
				t.Fatalf("engine %v, native %v", got, want)
			}
		})
	}
}
