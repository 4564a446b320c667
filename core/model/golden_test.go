package model

import (
	"fmt"
	"math"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// loadDir loads a model directory (config.json + safetensors).
func loadDir(t testing.TB, dir string) *Model {
	t.Helper()
	cfg, err := config.Load(dir)
	require.NoError(t, err)
	ck, err := safetensors.OpenDir(dir)
	require.NoError(t, err)
	t.Cleanup(func() { ck.Close() })
	m, err := Load(cfg, ck)
	require.NoError(t, err)
	return m
}

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		num = math.Max(num, math.Abs(float64(got[i]-want[i])))
		den = math.Max(den, math.Abs(float64(want[i])))
	}
	return num / math.Max(den, 1e-30)
}

// TestGoldens compares every layer boundary and the logits with the
// activations of the independent PyTorch reference (models/reference),
// computed in float64 from the same checkpoint.
func TestGoldens(t *testing.T) {
	for _, name := range []string{"k3-nano", "kimi-linear-nano", "qwen3-next-nano", "deepseek-v3-nano", "qwen3-next-variant", "deepseek-v3-variant"} {
		for _, piece := range []int{70, 64, 13, 1} {
			t.Run(fmt.Sprintf("%s/piece=%d", name, piece), func(t *testing.T) {
				dir := filepath.Join("..", "..", "testdata", "golden", name)
				m := loadDir(t, dir)
				g, err := openFile(filepath.Join(dir, "golden.safetensors"))
				require.NoError(t, err)
				defer g.Close()
				ids := goldenIDs(t, g)
				T, d, V := len(ids), m.Cfg.HiddenSize, m.Cfg.VocabSize
				got := map[string][]float32{}
				r := NewRunner(m, Options{MaxChunk: piece, KDAChunk: 16})
				defer r.Close()
				r.Trace = func(n string, layer int, data []float32, tn int) {
					key := n
					if layer >= 0 {
						key = fmt.Sprintf("%s.%d", n, layer)
					}
					got[key] = append(got[key], data[:tn*d]...)
				}
				st := m.NewState()
				logits := make([]float32, T*V)
				for t0 := 0; t0 < T; t0 += piece {
					t1 := min(T, t0+piece)
					require.NoError(t, r.Forward(st, ids[t0:t1], logits[t0*V:t1*V]))
				}
				got["logits"] = logits
				for _, key := range g.Names() {
					want, err := g.Float32(key)
					require.NoError(t, err)
					require.Len(t, got[key], len(want), key)
					e := relErr(got[key], want)
					require.Less(t, e, 1e-4, "%s: max relative error %.2e", key, e)
				}
			})
		}
	}
}

func openFile(path string) (*safetensors.Checkpoint, error) {
	dir, base := filepath.Split(path)
	return safetensors.Open(func(name string) (safetensors.Source, error) {
		if name == "model.safetensors" {
			name = base
		}
		return safetensors.OpenFile(filepath.Join(dir, name))
	})
}

func goldenIDs(t *testing.T, g *safetensors.Checkpoint) []int {
	md := g.Files()[0].Metadata
	var ids []int
	for _, f := range strings.Split(md["input_ids"], ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err)
		ids = append(ids, v)
	}
	return ids
}
