package desk

import (
	"bytes"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// nanoDir writes a random k3-nano checkpoint (seed 1) into a temp dir.
func nanoDir(t *testing.T) string {
	t.Helper()
	raw, err := presets.Read("k3-nano")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	js, err := cfg.Marshal(cfg.Layout)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := safetensors.WriteDir(dir, model.RandomTensors(cfg, 1, "F32"), nil, 0); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestByteStreamHoldsBackUTF8(t *testing.T) {
	st := tokenizer.ByteCodec{VocabSize: 512}.Stream()
	var out []string
	for _, id := range []int{'a', 0xc3, 0xa9, 300, 0xe2, 0x82} {
		p, err := st.Add(id)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, p)
	}
	out = append(out, st.Flush())
	if got := strings.Join(out, "|"); got != "a||é|<|300|>|||\xe2\x82" {
		t.Errorf("pieces %q", got)
	}
	if _, err := (tokenizer.ByteCodec{VocabSize: 100}).Encode("x"); err == nil {
		t.Error("a 100-token vocabulary encoded bytes")
	}
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "s.json")
	os.WriteFile(p, []byte(`{"prompt": "hi", "image": "a.png", "max_tokens": 5, "top_p": 0.5}`), 0o644)
	s, err := LoadScript(p)
	if err != nil {
		t.Fatal(err)
	}
	if s.Image != filepath.Join(dir, "a.png") {
		t.Errorf("image %q not resolved against the script's directory", s.Image)
	}
	set, err := s.Settings(DefaultSettings())
	if err != nil {
		t.Fatal(err)
	}
	if set.MaxTokens != 5 || set.Sampler.TopP != 0.5 || set.Sampler.Seed != 1 || set.Sampler.RepetitionPenalty != 1 {
		t.Errorf("settings %+v", set)
	}
	for body, want := range map[string]string{
		`{"prompt": ""}`:                     "prompt",
		`{"prompt": "x", "temprature": 1}`:   "temprature",
		`{"prompt": "x", "max_tokens": -1}`:  "max_tokens",
		`{"prompt": "x", "temperature": -1}`: "emperature",
	} {
		os.WriteFile(p, []byte(body), 0o644)
		if _, err := LoadScript(p); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one naming %q", body, err, want)
		}
	}
}

func TestDecodeImage(t *testing.T) {
	img := image.NewRGBA(image.Rect(0, 0, 2100, 30))
	img.Set(0, 0, color.RGBA{255, 0, 0, 255})
	var buf bytes.Buffer
	png.Encode(&buf, img)
	li, err := DecodeImage("x.png", bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if li.W != 2100 || li.Format != "png" || li.Img.Bounds().Dx() > maxShownSide {
		t.Errorf("got %d×%d %s shown at %v", li.W, li.H, li.Format, li.Img.Bounds())
	}
	if _, err := DecodeImage("y.png", bytes.NewReader([]byte("not an image"))); err == nil || !strings.Contains(err.Error(), "y.png") {
		t.Errorf("error %v does not name the file", err)
	}
	// JPEG goes through the model's decoder: jpegli, EXIF orientation
	// applied (quadrants-exif6.jpg is stored 64×40, shown 40×64).
	data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "testdata", "images", "quadrants-exif6.jpg"))
	if err != nil {
		t.Fatal(err)
	}
	li, err = DecodeImage("q.jpg", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if li.Format != "jpeg" || li.Decoder != imageio.DecoderJPEGLI || li.W != 40 || li.H != 64 {
		t.Errorf("q.jpg: %s by %q, %d×%d; want jpeg by jpegli, 40×64", li.Format, li.Decoder, li.W, li.H)
	}
}

// TestControllerMatchesSession checks that the app's generation yields the
// tokens generate.Session does (what `tessera run` uses), and that Stop
// stops a long generation.
func TestControllerMatchesSession(t *testing.T) {
	dir := nanoDir(t)
	m, ck, err := model.OpenDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	codec, err := tokenizer.LoadCodec(dir, m.Cfg.VocabSize)
	if err != nil {
		t.Fatal(err)
	}
	set := DefaultSettings()
	set.MaxTokens, set.Sampler.Temperature, set.Sampler.TopP, set.Sampler.Seed = 20, 0.9, 0.9, 3
	prompt := "Hello, world"

	r := model.NewRunner(m, model.Options{MaxChunk: 64})
	ids, _ := codec.Encode(prompt)
	sess := generate.NewSession(r, len(ids)+set.MaxTokens)
	stream := codec.Stream()
	var want strings.Builder
	for tok, err := range sess.Generate(ids, generate.Options{Sampler: set.Sampler, MaxTokens: set.MaxTokens, Stop: m.Cfg.EOSTokenIDs, Vocab: codec.Vocab()}) {
		if err != nil {
			t.Fatal(err)
		}
		p, _ := stream.Add(tok)
		want.WriteString(p)
	}
	want.WriteString(stream.Flush() + "\n")
	r.Close()

	e, err := engine.Open(dir, engine.OpenOptions{Chunk: 64})
	if err != nil {
		t.Fatal(err)
	}
	b := NewBackend(e, "CPU backend")
	defer b.Close()
	live := engine.NewLiveView(m.Cfg, 64, 100)
	c := NewController(b, codec, live, m.Cfg.EOSTokenIDs)
	if err := c.Start(prompt, nil, set); err != nil {
		t.Fatal(err)
	}
	c.Wait()
	st := c.Status(-1)
	if st.Err != nil || st.Generated != 20 || st.Prompt != len(ids) || st.TTFT <= 0 {
		t.Fatalf("status %+v", st)
	}
	if got := c.Output(); got != want.String() {
		t.Errorf("output %q, want %q", got, want.String())
	}
	v := live.View()
	if !v.HasData || v.Tokens != len(ids)+20 || len(v.Steps) != 20 || v.Steps[0].Tokens != len(ids) || v.Last.CacheTokens != len(ids)+19 {
		t.Errorf("live view: tokens %d steps %d first %d cache %d", v.Tokens, len(v.Steps), v.Steps[0].Tokens, v.Last.CacheTokens)
	}
	if err := c.Start("", nil, set); err == nil {
		t.Error("an empty prompt started")
	}
	set.MaxTokens = 100000
	if err := c.Start(prompt, nil, set); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(prompt, nil, set); err != ErrBusy {
		t.Errorf("second Start: %v, want ErrBusy", err)
	}
	c.Stop()
	c.Wait()
	if st := c.Status(-1); !st.Stopped || st.Running || st.Generated >= 100000 {
		t.Errorf("after Stop: %+v", st)
	}
}
