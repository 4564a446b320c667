package generate

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
)

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range want {
		num = math.Max(num, math.Abs(float64(got[i]-want[i])))
		den = math.Max(den, math.Abs(float64(want[i])))
	}
	return num / math.Max(den, 1e-30)
}

func ints(t *testing.T, s string) []int {
	var out []int
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(t, err)
		out = append(out, v)
	}
	return out
}

// TestVisionGolden runs the whole image path — PNG decode, smart resize,
// patches, vision tower, projector, early fusion, the LM at every layer
// boundary, logits — against the independent PyTorch reference
// (models/reference/make_vision_golden.py, float64).
func TestVisionGolden(t *testing.T) {
	dir := filepath.Join("..", "..", "testdata", "golden", "k3-nano-vision")
	m, ck, err := model.OpenDir(dir)
	require.NoError(t, err)
	defer ck.Close()
	require.True(t, m.HasVision())
	g, err := safetensors.Open(func(name string) (safetensors.Source, error) {
		if name == "model.safetensors" {
			name = "golden.safetensors"
		}
		return safetensors.DirOpener(dir)(name)
	})
	require.NoError(t, err)
	defer g.Close()
	md := g.Files()[0].Metadata
	want := func(name string) []float32 {
		v, err := g.Float32(name)
		require.NoError(t, err, name)
		return v
	}
	check := func(name string, got []float32) {
		w := want(name)
		require.Len(t, got, len(w), name)
		e := relErr(got, w)
		require.Less(t, e, 1e-4, "%s: max relative error %.2e", name, e)
	}

	png, err := os.ReadFile(filepath.Join(dir, md["image"]))
	require.NoError(t, err)
	img, _, err := imageio.Decode(png, imageio.Limits{})
	require.NoError(t, err)
	px, err := imageio.Preprocess(img, m.VisionCfg.Preprocess())
	require.NoError(t, err)
	require.Equal(t, md["grid"], fmt.Sprintf("%d,%d", px.GridH, px.GridW))
	check("patches", px.Data)
	tower, err := m.VisionTower()
	require.NoError(t, err)
	feat, err := tower.Encode(nil, px)
	require.NoError(t, err)
	check("projector_out", feat)

	r := model.NewRunner(m, model.Options{MaxChunk: 32})
	defer r.Close()
	ids, emb, err := Multimodal(r, ints(t, md["prompt_ids"]), [][]byte{png}, imageio.Limits{})
	require.NoError(t, err)
	require.Equal(t, ints(t, md["input_ids"]), ids)
	check("fused_embeds", emb)

	d, V := m.Cfg.HiddenSize, m.Cfg.VocabSize
	got := map[string][]float32{}
	r.Trace = func(n string, layer int, data []float32, T int) {
		key := n
		if layer >= 0 {
			key = fmt.Sprintf("%s.%d", n, layer)
		}
		got[key] = append(got[key], data[:T*d]...)
	}
	st := m.NewState()
	T := len(ids)
	logits := make([]float32, T*V)
	for t0 := 0; t0 < T; t0 += 32 {
		t1 := min(T, t0+32)
		require.NoError(t, r.ForwardEmbeddings(st, emb[t0*d:t1*d], t1-t0, logits[t0*V:t1*V]))
	}
	got["logits"] = logits
	checked := 0
	for _, name := range g.Names() {
		if strings.HasPrefix(name, "vision_") || name == "patches" || name == "projector_out" || name == "fused_embeds" {
			continue
		}
		check(name, got[name])
		checked++
	}
	require.Equal(t, 4*m.Cfg.NumHiddenLayers+2, checked, "every layer boundary, the final hidden state and the logits")
}
