//go:build cgo && !js

package wgsl_test

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/vision"
	"github.com/tessera-llm/tessera/wgsl"
)

// visionTower is m's vision tower (model.Model.VisionTower).
func visionTower(t testing.TB, m *model.Model) *vision.Tower {
	t.Helper()
	tw, err := m.VisionTower()
	if err != nil {
		t.Fatal(err)
	}
	return tw
}

// visionModel opens the k3-nano-vision golden checkpoint and its image.
func visionModel(t testing.TB) (*model.Model, []byte) {
	t.Helper()
	dir := filepath.Join("..", "testdata", "golden", "k3-nano-vision")
	m, ck, err := model.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ck.Close() })
	if !m.HasVision() {
		t.Fatal("k3-nano-vision: no vision tower")
	}
	png, err := os.ReadFile(filepath.Join(dir, "image.png"))
	if err != nil {
		t.Fatal(err)
	}
	return m, png
}

// TestRunnerEmbeddingsMatchesCPU pins the GPU runner's input-embeddings
// path (image features fused on the CPU) to the CPU runner: every logit of
// every prefill piece within wholeModelTol, then identical greedy tokens.
func TestRunnerEmbeddingsMatchesCPU(t *testing.T) {
	d := device(t)
	m, png := visionModel(t)
	V, dm := m.Cfg.VocabSize, m.Cfg.HiddenSize
	const chunk = 8
	jpg, err := os.ReadFile(filepath.Join("..", "testdata", "images", "quadrants.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	cpu := model.NewRunner(m, model.Options{MaxChunk: chunk})
	defer cpu.Close()
	ph := m.Cfg.MediaPlaceholderTokenID
	prompt := []int{ph, 10, 20, ph, 30, 40}
	ids, emb, err := generate.Multimodal(cpu, prompt, [][]byte{png, jpg}, imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) <= chunk {
		t.Fatalf("%d tokens: want more than one piece of %d", len(ids), chunk)
	}
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: chunk, MaxContext: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	t0 := time.Now()
	st := m.NewState()
	want, got := make([]float32, chunk*V), make([]float32, chunk*V)
	worst := 0.0
	for p0 := 0; p0 < len(ids); p0 += chunk {
		n := min(chunk, len(ids)-p0)
		e := emb[p0*dm : (p0+n)*dm]
		if err := cpu.ForwardEmbeddings(st, e, n, want[:n*V]); err != nil {
			t.Fatal(err)
		}
		if err := g.ForwardEmbeddings(e, n, got[:n*V]); err != nil {
			t.Fatal(err)
		}
		r := maxRelErr(got[:n*V], want[:n*V])
		worst = max(worst, r)
		if r > wholeModelTol {
			t.Fatalf("piece at %d: max relative error %.3g > %g", p0, r, wholeModelTol)
		}
	}
	if err := g.ForwardEmbeddings(emb[:dm], 1, got[:V/2]); err == nil {
		t.Error("a logits buffer shorter than the vocabulary was accepted")
	}
	if err := g.ForwardEmbeddings(emb[:dm-1], 1, nil); err == nil {
		t.Error("a short embeddings slice was accepted")
	}

	// Greedy generation through generate.Session on both backends.
	opt := generate.Options{MaxTokens: 24}
	run := func(s *generate.Session) []int {
		var out []int
		for tok, err := range s.GenerateEmbedded(ids, emb, opt) {
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, tok)
		}
		return out
	}
	if err := g.Reset(); err != nil {
		t.Fatal(err)
	}
	gpuToks := run(generate.NewSessionOn(g, len(ids)+opt.MaxTokens))
	cpuToks := run(generate.NewSession(cpu, len(ids)+opt.MaxTokens))
	if !slices.Equal(gpuToks, cpuToks) {
		t.Fatalf("greedy tokens differ:\nGPU %v\nCPU %v", gpuToks, cpuToks)
	}
	t.Logf("%d tokens (%d from 2 images), worst max relative error %.2g, %d greedy tokens equal; %v",
		len(ids), len(ids)-len(prompt)+2, worst, len(gpuToks), time.Since(t0).Round(time.Millisecond))
}

// TestVisionTowerMatchesCPU pins the GPU vision tower to the CPU tower
// (vision.Tower.Encode) on the k3-nano-vision golden checkpoint
// (rmsnorm, patchmerger, 2D RoPE) and on variants with LayerNorm, exact
// GELU, interpolated absolute position embeddings and the patchmergerv2
// projector, for several image sizes; then the multimodal GPU path with the
// GPU tower gives the CPU path's greedy tokens.
func TestVisionTowerMatchesCPU(t *testing.T) {
	d := device(t)
	m, png := visionModel(t)
	var imgs []*imageio.Patches
	for _, name := range []string{"", "quadrants.jpg", "gray.png", "alpha.png"} {
		data := png
		if name != "" {
			var err error
			if data, err = os.ReadFile(filepath.Join("..", "testdata", "images", name)); err != nil {
				t.Fatal(err)
			}
		}
		img, _, err := imageio.Decode(data, imageio.Limits{})
		if err != nil {
			t.Fatal(err)
		}
		px, err := imageio.Preprocess(img, m.VisionCfg.Preprocess())
		if err != nil {
			t.Fatal(err)
		}
		imgs = append(imgs, px)
	}
	towers := map[string]*vision.Tower{"golden": visionTower(t, m)}
	for _, v := range visionVariants(t, m) {
		towers[v.name] = v.t
	}
	for name, tw := range towers {
		t.Run(name, func(t *testing.T) {
			g, err := wgsl.NewVisionTower(d, tw, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			objects := -1
			for i, px := range imgs {
				want, err := tw.Encode(nil, px)
				if err != nil {
					t.Fatal(err)
				}
				got, err := g.Encode(px)
				if err != nil {
					t.Fatal(err)
				}
				if e := maxRelErr(got, want); e > wholeModelTol {
					t.Fatalf("image %d (%dx%d grid): max relative error %.3g > %g", i, px.GridH, px.GridW, e, wholeModelTol)
				} else {
					t.Logf("image %d (%dx%d grid): max relative error %.2g", i, px.GridH, px.GridW, e)
				}
				if i == 0 {
					objects = d.ObjectsForTest()
				}
			}
			if n := d.ObjectsForTest(); n != objects {
				t.Errorf("encoding created GPU objects: %d cached objects after image 1, %d after image %d", objects, n, len(imgs))
			}
		})
	}
	big := *imgs[0]
	big.GridH, big.GridW = 2*g0(imgs), 2*g0(imgs)
	big.Data = make([]float32, big.N()*big.Dim)
	g, err := wgsl.NewVisionTower(d, visionTower(t, m), imgs[0].N())
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if _, err := g.Encode(&big); err == nil {
		t.Error("an image over the tower's patch capacity was accepted")
	}
}

func g0(imgs []*imageio.Patches) int { return max(imgs[0].GridH, imgs[0].GridW) }

type towerVariant struct {
	name string
	t    *vision.Tower
}

// visionVariants derives towers from m's with the other config options:
// LayerNorm blocks with exact GELU and divided_fixed position embeddings,
// and the patchmergerv2 projector.
func visionVariants(t testing.TB, m *model.Model) []towerVariant {
	base := visionTower(t, m)
	r := rand.New(rand.NewPCG(3, 4))
	vec := func(n int, s float32) []float32 {
		v := make([]float32, n)
		for i := range v {
			v[i] = s * float32(r.NormFloat64())
		}
		return v
	}
	c1 := *base.Cfg
	c1.RMSNorm, c1.Act, c1.ProjAct = false, vision.ActGELUErf, vision.ActGELUErf
	c1.PosEmb, c1.PosEmbH, c1.PosEmbW = vision.PosDividedFixed, 5, 3
	t1 := *base
	t1.Cfg = &c1
	t1.PosEmb = vec(5*3*c1.Hidden, 0.5)
	ln := func(n vision.Norm) vision.Norm {
		return vision.Norm{W: n.W, B: vec(len(n.W), 0.3), Eps: 1e-5}
	}
	t1.Blocks = nil
	for _, b := range base.Blocks {
		b.Norm0, b.Norm1 = ln(b.Norm0), ln(b.Norm1)
		t1.Blocks = append(t1.Blocks, b)
	}
	t1.FinalNorm = ln(base.FinalNorm)
	c2 := *base.Cfg
	c2.Projector = vision.ProjPatchMergerV2
	t2 := *base
	t2.Cfg = &c2
	t2.PreNorm = nil
	t2.PostNorm = &vision.Norm{W: vec(c2.TextHidden, 1), RMS: true, Eps: 1e-6}
	return []towerVariant{{"layernorm-gelu-posemb", &t1}, {"patchmergerv2", &t2}}
}

// TestMultimodalGPUTower runs the whole image path on the GPU (GPU tower,
// GPU runner) and compares it with the CPU path: fused embeddings within
// 1e-4 and identical greedy tokens.
func TestMultimodalGPUTower(t *testing.T) {
	d := device(t)
	m, png := visionModel(t)
	cpu := model.NewRunner(m, model.Options{MaxChunk: 8})
	defer cpu.Close()
	ph := m.Cfg.MediaPlaceholderTokenID
	prompt := []int{ph, 10, 20, 30}
	ids, emb, err := generate.Multimodal(cpu, prompt, [][]byte{png}, imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	tw, err := wgsl.NewVisionTower(d, visionTower(t, m), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	gids, gemb, err := generate.MultimodalWith(m, tw, prompt, [][]byte{png}, imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(ids, gids) {
		t.Fatalf("expanded ids differ: GPU %v, CPU %v", gids, ids)
	}
	if e := maxRelErr(gemb, emb); e > wholeModelTol {
		t.Fatalf("fused embeddings: max relative error %.3g > %g", e, wholeModelTol)
	}
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	opt := generate.Options{MaxTokens: 16}
	var gt, ct []int
	for tok, err := range generate.NewSessionOn(g, 64).GenerateEmbedded(gids, gemb, opt) {
		if err != nil {
			t.Fatal(err)
		}
		gt = append(gt, tok)
	}
	for tok, err := range generate.NewSession(cpu, 64).GenerateEmbedded(ids, emb, opt) {
		if err != nil {
			t.Fatal(err)
		}
		ct = append(ct, tok)
	}
	if !slices.Equal(gt, ct) {
		t.Fatalf("greedy tokens differ:\nGPU %v\nCPU %v", gt, ct)
	}
}
