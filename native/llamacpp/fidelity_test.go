//go:build cgo && linux && amd64

package llamacpp

import (
	"fmt"
	"math"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/models/presets"
)

// fidelityTol is the largest relative logit error allowed between llama.cpp
// (F32 GGUF, flash attention off, F32 cache) and tessera: per position,
// max |llama − tessera| / max |tessera| over the vocabulary.
const fidelityTol = 1e-4

// writeRandomModel writes a random F32 checkpoint of a preset in the given
// layout (kimi_linear or kimi_k3; "" keeps the preset's) as a tessera
// model directory.
func writeRandomModel(t testing.TB, dir, preset, layout string, seed uint64) {
	t.Helper()
	raw, err := presets.Read(preset)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	if layout != "" {
		if cfg.Layout, err = config.ParseLayout(layout); err != nil {
			t.Fatal(err)
		}
	}
	if err := model.WriteRandomDir(dir, cfg, seed, "F32"); err != nil {
		t.Fatal(err)
	}
}

// relErr is max_i |got_i − want_i| / max_i |want_i|.
func relErr(got, want []float32) float64 {
	var diff, scale float64
	for i := range want {
		diff = max(diff, math.Abs(float64(got[i])-float64(want[i])))
		scale = max(scale, math.Abs(float64(want[i])))
	}
	if scale == 0 {
		return diff
	}
	return diff / scale
}

// promptIDs are deterministic ids spread over the vocabulary.
func promptIDs(n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 13) % vocab
	}
	return ids
}

// tesseraLogits returns tessera's logits [T, V] of every position: in one
// Forward call (oneCall) or one token at a time.
func tesseraLogits(t testing.TB, m *model.Model, ids []int, oneCall bool) []float32 {
	t.Helper()
	V := m.Cfg.VocabSize
	chunk := 1
	if oneCall {
		chunk = len(ids)
	}
	r := model.NewRunner(m, model.Options{MaxChunk: chunk, Workers: 2})
	defer r.Close()
	st := m.NewState()
	out := make([]float32, len(ids)*V)
	for i := 0; i < len(ids); i += chunk {
		j := min(len(ids), i+chunk)
		if err := r.Forward(st, ids[i:j], out[i*V:j*V]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// peerLogits returns llama.cpp's logits [T, V] of every position: the
// prompt decoded in one llama_decode call, or one token per call.
func peerLogits(t testing.TB, lm *Model, ids []int, oneCall bool) []float32 {
	t.Helper()
	// One thread: ggml's workers spin while waiting, and with the other
	// test packages on the cores two threads run ~10x slower here.
	ctx, err := lm.NewContext(ContextParams{NCtx: len(ids), Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer ctx.Close()
	V := lm.NVocab()
	out := make([]float32, len(ids)*V)
	if oneCall {
		if err := ctx.Decode(ids, true); err != nil {
			t.Fatal(err)
		}
		for i := range ids {
			if _, err := ctx.Logits(i, out[i*V:(i+1)*V]); err != nil {
				t.Fatal(err)
			}
		}
		return out
	}
	for i := range ids {
		if err := ctx.Decode(ids[i:i+1], false); err != nil {
			t.Fatal(err)
		}
		if _, err := ctx.Logits(0, out[i*V:(i+1)*V]); err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// TestFidelity exports random checkpoints of the presets as F32 GGUF
// (gguf.Export), runs them in llama.cpp with exact settings (flash
// attention off, F32 K/V and latent cache) and requires every position's
// logits to equal tessera's within fidelityTol, with the prompt decoded
// in one call and token by token. llama.cpp's kimi-k3 / kimi-linear code
// is an independent implementation of the same architecture, so this
// checks tessera's forward pass and the GGUF mapping together.
func TestFidelity(t *testing.T) {
	lib := openPeer(t)
	cases := []struct {
		preset string
		layout string
		prompt int
	}{
		{"k3-nano", "kimi_linear", 80},
		{"k3-nano", "kimi_k3", 80},
		{"kimi-linear-nano", "", 80},
		{"qwen3-next-nano", "", 80},
		{"deepseek-v3-nano", "", 80},
		// direct q_proj ("lite"), no YaRN, no expert groups, top-1, two dense layers
		{"../../models/reference/configs/deepseek-v3-variant.json", "", 40},
		{"k3-mini", "", 24},
	}
	if testing.Short() {
		cases = cases[:6]
	}
	for _, c := range cases {
		name := strings.TrimSuffix(filepath.Base(c.preset), ".json")
		if c.layout != "" {
			name += "/" + c.layout
		}
		t.Run(name, func(t *testing.T) {
			t0 := time.Now()
			dir := t.TempDir()
			mdir := filepath.Join(dir, "model")
			writeRandomModel(t, mdir, c.preset, c.layout, 1)
			path := filepath.Join(dir, "model-f32.gguf")
			if err := gguf.Export(mdir, path, gguf.ExportOptions{Type: "f32"}); err != nil {
				t.Fatal(err)
			}
			tm, ck, err := model.OpenDir(mdir)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			lm, err := lib.LoadModel(path, ModelParams{})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			if lm.NVocab() != tm.Cfg.VocabSize {
				t.Fatalf("llama.cpp vocab %d, tessera %d", lm.NVocab(), tm.Cfg.VocabSize)
			}
			V := tm.Cfg.VocabSize
			ids := promptIDs(c.prompt, V)
			prep := time.Since(t0)
			var tTessera, tPeer time.Duration
			for _, oneCall := range []bool{true, false} {
				mode := "token by token"
				if oneCall {
					mode = "one call"
				}
				t1 := time.Now()
				want := tesseraLogits(t, tm, ids, oneCall)
				t2 := time.Now()
				got := peerLogits(t, lm, ids, oneCall)
				tTessera, tPeer = tTessera+t2.Sub(t1), tPeer+time.Since(t2)
				worst, at := 0.0, 0
				for p := range ids {
					if e := relErr(got[p*V:(p+1)*V], want[p*V:(p+1)*V]); e > worst || math.IsNaN(e) {
						worst, at = e, p
						if math.IsNaN(e) {
							break
						}
					}
				}
				msg := fmt.Sprintf("%s (%s), %s, %d positions: max relative logit error %.2e (position %d)", name, lm.Desc(), mode, len(ids), worst, at)
				if !(worst <= fidelityTol) {
					t.Errorf("%s > %.0e", msg, fidelityTol)
				} else {
					t.Log(msg)
				}
			}
			if c.preset == "k3-nano" && c.layout == "kimi_linear" {
				// Control: tessera with its final RMSNorm weight scaled by
				// 1.001 (logits off by 0.1 %) must fail the comparison.
				orig := tm.Norm
				tm.Norm = make([]float32, len(orig))
				for i, w := range orig {
					tm.Norm[i] = w * 1.001
				}
				off := tesseraLogits(t, tm, ids, true)
				tm.Norm = orig
				got := peerLogits(t, lm, ids, true)
				worst := 0.0
				for p := range ids {
					worst = max(worst, relErr(got[p*V:(p+1)*V], off[p*V:(p+1)*V]))
				}
				if worst <= fidelityTol {
					t.Errorf("control: a 0.1 %% change of tessera's logits gave relative error %.2e ≤ %.0e: the comparison cannot see it", worst, fidelityTol)
				}
			}
			t.Logf("%s: %.1fs (checkpoint + GGUF export + loading %.1fs, tessera %.1fs, llama.cpp %.1fs)",
				name, time.Since(t0).Seconds(), prep.Seconds(), tTessera.Seconds(), tPeer.Seconds())
		})
	}
}
