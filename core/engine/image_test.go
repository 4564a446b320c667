package engine

import (
	"bytes"
	"context"
	"image"
	"image/color"
	"image/png"
	"slices"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// visionFiles is what `tessera init-random --config k3-nano-vision --seed
// 1 --layout kimi_k3` writes.
func visionFiles(t *testing.T) map[string][]byte {
	t.Helper()
	raw, err := presets.Read("k3-nano-vision")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Layout = config.LayoutKimiK3
	js, err := cfg.Marshal(cfg.Layout)
	if err != nil {
		t.Fatal(err)
	}
	ts, err := model.RandomCheckpoint(cfg, 1, "F32")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{ConfigFile: js, safetensors.SingleFileName: buf.Bytes()}
}

// testRGBA is a w×h gradient with a transparent stripe, as a browser's
// ImageData would hold it.
func testRGBA(w, h int) *image.NRGBA {
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			a := uint8(255)
			if y < h/6 {
				a = uint8(x * 255 / w) // composited over white
			}
			img.SetNRGBA(x, y, color.NRGBA{uint8(x * 255 / w), uint8(y * 255 / h), uint8((x + y) * 7), a})
		}
	}
	return img
}

// nativeImageIDs generates as `tessera run --backend cpu --image FILE.png
// --ids` does: the image encoded as PNG, decoded by core/imageio and fused
// by generate.MultimodalWith.
func nativeImageIDs(t *testing.T, e *Engine, prompt string, imgs []*image.NRGBA, maxTok int) []int {
	t.Helper()
	var data [][]byte
	for _, img := range imgs {
		var buf bytes.Buffer
		if err := png.Encode(&buf, img); err != nil {
			t.Fatal(err)
		}
		data = append(data, buf.Bytes())
	}
	ids, err := e.codec.Encode(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if ids, err = generate.ImagePrompt(e.codec, e.Cfg.MediaPlaceholderTokenID, len(imgs), ids); err != nil {
		t.Fatal(err)
	}
	r := model.NewRunner(e.Model, model.Options{MaxChunk: 64})
	defer r.Close()
	full, emb, err := generate.Multimodal(r, ids, data, imageio.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	var out []int
	s := generate.NewSession(r, len(full)+maxTok)
	for tok, err := range s.GenerateEmbedded(full, emb, generate.Options{MaxTokens: maxTok, Stop: e.Cfg.EOSTokenIDs, Vocab: e.codec.Vocab()}) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tok)
	}
	return out
}

func TestImageMatchesNative(t *testing.T) {
	e, err := Load(safetensors.MemOpener(visionFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	info := e.Info()
	if !info.Vision || info.ImageTokens == nil || info.ImageTokens.Sample != 256 || info.ImageTokens.Max != 256 || info.ImageTokens.PatchSize != 14 {
		t.Errorf("info: vision %v, image tokens %+v; want 256 tokens for 448×448 and at most", info.Vision, info.ImageTokens)
	}
	a, b := testRGBA(64, 48), testRGBA(30, 90)
	const prompt, maxTok = "What is in the picture?", 12
	for _, tc := range []struct {
		name string
		imgs []*image.NRGBA
	}{{"one image", []*image.NRGBA{a}}, {"two images", []*image.NRGBA{a, b}}} {
		t.Run(tc.name, func(t *testing.T) {
			want := nativeImageIDs(t, e, prompt, tc.imgs, maxTok)
			var images []Image
			for _, img := range tc.imgs {
				images = append(images, Image{Width: img.Rect.Dx(), Height: img.Rect.Dy(), RGBA: img.Pix})
			}
			var got []int
			st, err := e.Generate(context.Background(), Options{Prompt: prompt, Images: images, MaxTokens: maxTok}, func(p Piece) bool {
				got = append(got, p.ID)
				return true
			})
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("engine ids %v\nnative ids %v", got, want)
			}
			if len(st.Images) != len(tc.imgs) {
				t.Fatalf("stats images %+v", st.Images)
			}
			n := 0
			for i, im := range st.Images {
				wantTok, _ := e.Model.VisionCfg.TokensPerImage(im.Height, im.Width)
				if im.Width != tc.imgs[i].Rect.Dx() || im.Tokens != wantTok || im.Tokens == 0 || im.GridW*im.GridH != 4*im.Tokens {
					t.Errorf("image %d stats %+v, want %d tokens", i, im, wantTok)
				}
				n += im.Tokens
			}
			if st.PromptTokens != len(prompt)+n {
				t.Errorf("prompt tokens %d, want %d text + %d image", st.PromptTokens, len(prompt), n)
			}
			// Without the image the continuation differs (the image is used).
			var plain []int
			if _, err := e.Generate(context.Background(), Options{Prompt: prompt, MaxTokens: maxTok}, func(p Piece) bool {
				plain = append(plain, p.ID)
				return true
			}); err != nil {
				t.Fatal(err)
			}
			if slices.Equal(plain, got) {
				t.Errorf("the same ids with and without images: %v", got)
			}
		})
	}
}

// TestImageEncoderHook: a custom encoder (the GPU tower in the browser) is
// used and freed.
func TestImageEncoderHook(t *testing.T) {
	e, err := Load(safetensors.MemOpener(visionFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	calls, freed := 0, 0
	e.NewEncoder = func(m *model.Model) (generate.Encoder, func(), error) {
		enc, free, err := NewCPUEncoder(m)
		return countingEncoder{enc, &calls}, func() { freed++; free() }, err
	}
	img := testRGBA(40, 40)
	if _, err := e.Generate(context.Background(), Options{Tokens: []int{5, 6}, MaxTokens: 2,
		Images: []Image{{Width: 40, Height: 40, RGBA: img.Pix}, {Width: 40, Height: 40, RGBA: img.Pix}}}, func(Piece) bool { return true }); err != nil {
		t.Fatal(err)
	}
	if calls != 2 || freed != 1 {
		t.Errorf("encoder calls %d, frees %d; want 2 and 1", calls, freed)
	}
}

type countingEncoder struct {
	generate.Encoder
	n *int
}

func (c countingEncoder) Encode(px *imageio.Patches) ([]float32, error) {
	*c.n++
	return c.Encoder.Encode(px)
}

func TestImageErrors(t *testing.T) {
	e, err := Load(safetensors.MemOpener(visionFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	ok := testRGBA(8, 8).Pix
	for _, tc := range []struct {
		img  Image
		want string
	}{
		{Image{Width: 8, Height: 8, RGBA: ok[:10]}, "RGBA buffer has 10 bytes"},
		{Image{Width: 0, Height: 8, RGBA: nil}, "image 1"},
		{Image{Width: 20000, Height: 1, RGBA: make([]byte, 80000)}, "too large"},
		{Image{Width: 1000, Height: 2, RGBA: make([]byte, 8000)}, "aspect ratio"},
	} {
		_, err := e.Generate(context.Background(), Options{Prompt: "x", MaxTokens: 2, Images: []Image{tc.img}}, func(Piece) bool { return true })
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("image %dx%d (%d bytes): %v, want an error containing %q", tc.img.Width, tc.img.Height, len(tc.img.RGBA), err, tc.want)
		}
	}
	// A text-only model refuses images.
	txt, err := Load(safetensors.MemOpener(nanoFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer txt.Close()
	if info := txt.Info(); info.Vision || info.ImageTokens != nil {
		t.Errorf("k3-nano info: vision %v %+v", info.Vision, info.ImageTokens)
	}
	_, err = txt.Generate(context.Background(), Options{Prompt: "x", MaxTokens: 2, Images: []Image{{Width: 8, Height: 8, RGBA: ok}}}, func(Piece) bool { return true })
	if err == nil || !strings.Contains(err.Error(), "no vision tower") {
		t.Errorf("images on k3-nano: %v", err)
	}
}

// TestImagesInPrompt: with ImagesInPrompt the placeholders stay where the
// prompt has them (a chat template placed them): at the front they give
// the ids of the default placement; a count that differs is an error.
func TestImagesInPrompt(t *testing.T) {
	e, err := Load(safetensors.MemOpener(visionFiles(t)))
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	img := testRGBA(40, 40)
	images := []Image{{Width: 40, Height: 40, RGBA: img.Pix}}
	gen := func(o Options) ([]int, error) {
		var ids []int
		_, err := e.Generate(context.Background(), o, func(p Piece) bool { ids = append(ids, p.ID); return true })
		return ids, err
	}
	want, err := gen(Options{Tokens: []int{5, 6}, MaxTokens: 6, Images: images})
	if err != nil {
		t.Fatal(err)
	}
	ph := e.Cfg.MediaPlaceholderTokenID
	got, err := gen(Options{Tokens: []int{ph, 5, 6}, MaxTokens: 6, Images: images, ImagesInPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("placed ids %v, default placement %v", got, want)
	}
	moved, err := gen(Options{Tokens: []int{5, ph, 6}, MaxTokens: 6, Images: images, ImagesInPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if slices.Equal(moved, want) {
		t.Errorf("the image's position does not matter: %v", moved)
	}
	if _, err := gen(Options{Tokens: []int{5, 6}, MaxTokens: 2, Images: images, ImagesInPrompt: true}); err == nil || !strings.Contains(err.Error(), "1 images but 0 placeholder") {
		t.Errorf("no placeholder for the image: %v", err)
	}
}
