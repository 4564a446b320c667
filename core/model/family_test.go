package model

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// TestFamilySpecIsHuggingFaceLayout: the tensors a qwen3_next or
// deepseek_v3 config expects (what init-random writes) are, name for name
// and shape for shape, those of the checkpoint the independent PyTorch
// reference wrote for the same config (models/reference/families.py).
func TestFamilySpecIsHuggingFaceLayout(t *testing.T) {
	for _, name := range []string{"qwen3-next-nano", "deepseek-v3-nano", "qwen3-next-variant", "deepseek-v3-variant"} {
		dir := filepath.Join("..", "..", "testdata", "golden", name)
		cfg, err := config.Load(dir)
		require.NoError(t, err)
		ck, err := safetensors.OpenDir(dir)
		require.NoError(t, err)
		want := map[string][]int{}
		for _, n := range ck.Names() {
			tn, _ := ck.Tensor(n)
			want[n] = tn.Shape
		}
		ck.Close()
		got := map[string][]int{}
		for _, s := range Spec(cfg) {
			got[s.Name] = s.Shape
		}
		require.Equal(t, want, got, name)
	}
}

// TestFamilyRandomDirs: init-random's checkpoints of the family presets
// load (F32 and BF16), Qwen3-Next's zero-centred norms are bound as 1 + w,
// and the logits do not depend on the prefill piece size (the GDN state,
// the conv tails and the K/V and latent caches carry across pieces; piece
// 1 is the decode path).
func TestFamilyRandomDirs(t *testing.T) {
	for _, name := range []string{"qwen3-next-nano", "deepseek-v3-nano"} {
		for _, dt := range []safetensors.DType{"F32", "BF16"} {
			t.Run(fmt.Sprintf("%s/%s", name, dt), func(t *testing.T) {
				raw, err := presets.Read(name)
				require.NoError(t, err)
				cfg, err := config.Parse(raw)
				require.NoError(t, err)
				dir := t.TempDir()
				require.NoError(t, WriteRandomDir(dir, cfg, 3, dt))
				m, ck, err := OpenDir(dir)
				require.NoError(t, err)
				defer ck.Close()
				require.Equal(t, cfg.Layout, m.Cfg.Layout)
				require.NotNil(t, m.Family)
				if cfg.Layout == config.LayoutQwen3Next {
					w, err := ck.Float32("model.norm.weight")
					require.NoError(t, err)
					for i := range w {
						require.Equal(t, w[i]+1, m.Norm[i])
					}
				}
				ids := make([]int, 40)
				for i := range ids {
					ids[i] = (i*37 + 11) % cfg.VocabSize
				}
				V := cfg.VocabSize
				var ref []float32
				for _, piece := range []int{40, 13, 1} {
					r := NewRunner(m, Options{MaxChunk: piece, KDAChunk: 16})
					st := m.NewState()
					logits := make([]float32, len(ids)*V)
					for t0 := 0; t0 < len(ids); t0 += piece {
						t1 := min(len(ids), t0+piece)
						require.NoError(t, r.Forward(st, ids[t0:t1], logits[t0*V:t1*V]))
					}
					r.Close()
					require.False(t, slices.ContainsFunc(logits, func(v float32) bool { return v != v }), "NaN")
					if ref == nil {
						ref = logits
						continue
					}
					require.Less(t, relErr(logits, ref), 1e-4, "piece %d", piece)
				}
			})
		}
	}
}

// TestRealFamilyConfigs: the released configs of Qwen3-Next-80B-A3B and
// DeepSeek-V3 (fields as published; testdata/) parse, and the sizes
// derived from the tensor list are the published ones: 80 B total / 3 B
// active and 671 B / 37 B (without DeepSeek's MTP layer; active without
// the embedding and LM head); the state per
// token is what architecture.md §7.5 computes (fp32 here).
func TestRealFamilyConfigs(t *testing.T) {
	for _, c := range []struct {
		file                  string
		total, active         float64 // billions
		stateBytes, cacheByte int64
	}{
		{"qwen3-next-80b-a3b.json", 80, 3, 36 * 4 * (32*128*128 + 3*(2*16*128+32*128)), 12 * 4 * 2 * 2 * 256},
		{"deepseek-v3.json", 671, 37, 0, 61 * 4 * (512 + 64)},
	} {
		raw, err := os.ReadFile(filepath.Join("testdata", c.file))
		require.NoError(t, err)
		cfg, err := config.Parse(raw)
		require.NoError(t, err, c.file)
		s := ComputeStats(cfg)
		require.InDelta(t, c.total, float64(s.TotalParams)/1e9, c.total*0.02, "%s total %d", c.file, s.TotalParams)
		// published "active" counts exclude the embedding and LM head
		active := s.ActiveParams - 2*int64(cfg.VocabSize*cfg.HiddenSize)
		require.InDelta(t, c.active, float64(active)/1e9, c.active*0.1, "%s active %d", c.file, active)
		require.Equal(t, c.stateBytes, s.KDAStateBytes, c.file)
		require.Equal(t, c.cacheByte, s.CacheBytesPerTok, c.file)
	}
}

// TestFamilyIgnoresMTP: the multi-token-prediction tensors of the released
// checkpoints (Qwen3-Next "mtp.*", DeepSeek-V3's layer num_hidden_layers)
// are ignored as transformers ignores them; any other extra tensor is an
// error naming it.
func TestFamilyIgnoresMTP(t *testing.T) {
	for _, c := range []struct{ preset, mtp string }{
		{"qwen3-next-nano", "mtp.fc.weight"},
		{"deepseek-v3-nano", "model.layers.4.eh_proj.weight"},
	} {
		raw, err := presets.Read(c.preset)
		require.NoError(t, err)
		cfg, err := config.Parse(raw)
		require.NoError(t, err)
		load := func(extra string) error {
			ts := append(RandomTensors(cfg, 1, "F32"), safetensors.WriteTensor{Name: extra, DType: "F32", Shape: []int{2}, Data: []float32{1, 2}})
			var buf bytes.Buffer
			require.NoError(t, safetensors.Write(&buf, ts, nil))
			ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": buf.Bytes()}))
			require.NoError(t, err)
			_, err = Load(cfg, ck)
			return err
		}
		require.NoError(t, load(c.mtp), c.preset)
		require.ErrorContains(t, load("model.layers.0.mlp.extra.weight"), "does not use: model.layers.0.mlp.extra.weight")
	}
}
