package engine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// nanoFiles is what `tessera init-random --config k3-nano --seed 1` writes.
func nanoFiles(t *testing.T) map[string][]byte {
	t.Helper()
	raw, err := presets.Read("k3-nano")
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
	return map[string][]byte{ConfigFile: js, safetensors.SingleFileName: buf.Bytes()}
}

func TestGreedyMatchesGolden(t *testing.T) {
	e, err := Load(safetensors.MemOpener(nanoFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	// core/generate's pinned greedy continuation of this prompt.
	want := []int{18, 0, 306, 294, 141, 306, 294, 20, 328, 114, 337, 183, 353, 454, 281, 260}
	var got []int
	var text strings.Builder
	st, err := e.Generate(context.Background(), Options{Prompt: "Hello, tessera!", MaxTokens: 16}, func(p Piece) bool {
		got = append(got, p.ID)
		text.WriteString(p.Text)
		return true
	})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("greedy ids %v, want %v", got, want)
	}
	if st.Tokens != 16 || st.PromptTokens != 15 || st.Stopped != "length" {
		t.Errorf("stats %+v", st)
	}
	if !strings.Contains(text.String()+st.Tail, "<|306|>") {
		t.Errorf("text %q lacks the placeholder of id 306", text.String())
	}
	info := e.Info()
	if info.Backend != CPUBackend || info.ParamsTotal == 0 || info.ParamsActive >= info.ParamsTotal || info.Tokenizer != "none (byte ids)" || info.GPUMemory != nil {
		t.Errorf("info %+v", info)
	}
}

func TestCancelAndBusy(t *testing.T) {
	e, err := Load(safetensors.MemOpener(nanoFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := 0
	st, err := e.Generate(ctx, Options{Tokens: []int{1, 2, 3}, MaxTokens: 50,
		Sampler: generate.SamplerOptions{Temperature: 1, Seed: 3}}, func(Piece) bool {
		n++
		if n == 3 {
			cancel()
		}
		if n == 2 {
			// A second generation while this one runs is refused.
			if _, err := e.Generate(context.Background(), Options{Tokens: []int{1}, MaxTokens: 1}, func(Piece) bool { return true }); !errors.Is(err, ErrBusy) {
				t.Errorf("concurrent Generate: %v, want ErrBusy", err)
			}
		}
		return true
	})
	if err != nil || st.Stopped != "cancelled" || st.Tokens != 3 {
		t.Fatalf("cancelled generation: %+v, %v", st, err)
	}
	e.Close()
	if _, err := e.Generate(context.Background(), Options{Tokens: []int{1}, MaxTokens: 1}, func(Piece) bool { return true }); err == nil || !strings.Contains(err.Error(), "disposed") {
		t.Fatalf("after Close: %v", err)
	}
}

func TestLoadErrors(t *testing.T) {
	files := nanoFiles(t)
	_, err := Load(safetensors.MemOpener(map[string][]byte{}))
	if err == nil || !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("empty model: %v", err)
	}
	_, err = Load(safetensors.MemOpener(map[string][]byte{ConfigFile: files[ConfigFile]}))
	if err == nil || !strings.Contains(err.Error(), "model.safetensors") {
		t.Errorf("no weights: %v", err)
	}
	_, err = Load(safetensors.MemOpener(map[string][]byte{ConfigFile: []byte("{"), safetensors.SingleFileName: files[safetensors.SingleFileName]}))
	if err == nil || !strings.Contains(err.Error(), "config.json") {
		t.Errorf("bad config: %v", err)
	}
	bad := map[string][]byte{ConfigFile: files[ConfigFile], safetensors.SingleFileName: files[safetensors.SingleFileName], TokenizerFile: []byte(`{"model":{"type":"Unigram"}}`)}
	_, err = Load(safetensors.MemOpener(bad))
	if err == nil || !strings.Contains(err.Error(), "tokenizer.json") {
		t.Errorf("bad tokenizer: %v", err)
	}
	e, err := Load(safetensors.MemOpener(files))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	for _, o := range []Options{
		{MaxTokens: 4},
		{Prompt: "x", MaxTokens: 0},
		{Tokens: []int{1, 999}, MaxTokens: 4},
		{Prompt: "x", MaxTokens: 4, Sampler: generate.SamplerOptions{TopP: 2}},
	} {
		if _, err := e.Generate(context.Background(), o, func(Piece) bool { return true }); err == nil {
			t.Errorf("Generate(%+v) succeeded", o)
		}
	}
}

// FinishReason is the one mapping of Stats.Stopped to OpenAI's
// finish_reason (the API server, the browser's chat API).
func TestFinishReason(t *testing.T) {
	for stopped, want := range map[string]string{"stop": "stop", "length": "length", "context": "length", "cancelled": "stop"} {
		if got := (Stats{Stopped: stopped}).FinishReason(); got != want {
			t.Errorf("Stopped %q: finish_reason %q, want %q", stopped, got, want)
		}
	}
}
