package desk

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/config"
)

// needTool finds a program, skipping the test without it (failing under
// CI=true, where scripts/setup.sh desktop must have installed it).
func needTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not found (CI=true): run scripts/setup.sh desktop as root", name)
		}
		t.Skipf("%s not found: run scripts/setup.sh desktop as root to install Xvfb", name)
	}
	return p
}

// command runs a program and returns its stdout, failing with its stderr.
func command(t *testing.T, ctx context.Context, name string, args ...string) []byte {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %v: %v\nstderr:\n%s", filepath.Base(name), args, err, stderr.String())
	}
	return stdout.Bytes()
}

// TestScriptedUnderXvfb builds tessera and tessera-desktop, runs the app's scripted mode under Xvfb on a random
// k3-nano (text, sampling, vision, WebGPU) and on k3-micro captioning a scene
// (the README's picture), and checks the screenshot (not blank, heatmap
// drawn, image shown, text drawn) and that the text equals `tessera run`'s
// for the same inputs. With TESSERA_DESKTOP_README=write (make
// desktop-screenshot) the k3-micro screenshot becomes
// cmd/tessera-desktop/screenshot.png.
func TestScriptedUnderXvfb(t *testing.T) {
	xvfb := needTool(t, "xvfb-run")
	goBin := needTool(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	dir := t.TempDir()
	cli, app := filepath.Join(dir, "tessera"), filepath.Join(dir, "tessera-desktop")
	command(t, ctx, goBin, "build", "-o", cli, "../../../tessera")
	command(t, ctx, goBin, "build", "-o", app, "../..")
	mdir := filepath.Join(dir, "k3-nano")
	command(t, ctx, cli, "init-random", "--config", "k3-nano", "--seed", "1", "--out", mdir)
	vdir := filepath.Join(dir, "k3-nano-vision")
	command(t, ctx, cli, "init-random", "--config", "k3-nano-vision", "--seed", "1", "--out", vdir)
	// The README's picture: the bundled k3-micro captioning one of its
	// evaluation scenes (make desktop-screenshot writes it).
	micro, err := filepath.Abs(filepath.Join("..", "..", "..", "..", "models", "k3-micro"))
	if err != nil {
		t.Fatal(err)
	}
	scene := filepath.Join(micro, "eval", "scenes", "020.png")
	// A solid magenta test image: the image pane's centre must show it.
	magenta := color.RGBA{0xe0, 0x20, 0xc0, 0xff}
	img := image.NewRGBA(image.Rect(0, 0, 96, 64))
	for i := 0; i < len(img.Pix); i += 4 {
		copy(img.Pix[i:], []byte{magenta.R, magenta.G, magenta.B, 0xff})
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "in.png"), buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name    string
		model   string
		backend string // the app's --backend
		script  map[string]any
		flags   []string // the same settings for `tessera run`
		live    bool     // routing heatmap expected
	}{
		{"greedy", mdir, "cpu", map[string]any{"prompt": "The quick brown fox", "max_tokens": 24},
			[]string{"--max-tokens", "24"}, true},
		{"sampled", mdir, "cpu", map[string]any{"prompt": "Über naïve café", "max_tokens": 40, "temperature": 0.9, "top_p": 0.8, "top_k": 40, "seed": 7, "repetition_penalty": 1.1},
			[]string{"--max-tokens", "40", "--temperature", "0.9", "--top-p", "0.8", "--top-k", "40", "--seed", "7", "--repetition-penalty", "1.1"}, true},
		// The image goes through the vision tower: the text must equal
		// `tessera run --image`.
		{"vision", vdir, "cpu", map[string]any{"prompt": "What is in the picture?", "max_tokens": 16},
			[]string{"--max-tokens", "16", "--image", filepath.Join(dir, "in.png")}, true},
		// The WebGPU runner (lavapipe here) gives the CPU's greedy text,
		// and its routing fills the heatmap (read back from the device).
		{"gpu", mdir, "gpu", map[string]any{"prompt": "The quick brown fox", "max_tokens": 24},
			[]string{"--max-tokens", "24"}, true},
		{"readme", micro, "cpu", map[string]any{"prompt": "Describe the image.", "max_tokens": 16, "image": scene},
			[]string{"--max-tokens", "16", "--image", scene}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sc := tc.script
			if _, ok := sc["image"]; !ok {
				sc["image"] = "in.png"
			}
			sc["screenshot"] = tc.name + ".png"
			js, _ := json.Marshal(sc)
			spath := filepath.Join(dir, tc.name+".json")
			if err := os.WriteFile(spath, js, 0o644); err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			got := command(t, ctx, xvfb, "-a", "-s", fmt.Sprintf("-screen 0 %dx%dx24", WinW, WinH), app, "--model", tc.model, "--backend", tc.backend, "--script", spath)
			t.Logf("scripted run took %s", time.Since(start).Round(time.Millisecond))
			want := command(t, ctx, cli, append([]string{"run", "--model", tc.model, "--prompt", sc["prompt"].(string)}, tc.flags...)...)
			if !bytes.Equal(got, want) {
				t.Errorf("text differs from tessera run:\n got %q\nwant %q", got, want)
			}
			shot := filepath.Join(dir, tc.name+".png")
			if out := os.Getenv("TESSERA_DESKTOP_SHOT_DIR"); out != "" {
				if data, err := os.ReadFile(shot); err == nil {
					os.WriteFile(filepath.Join(out, "tessera-desktop-"+tc.name+".png"), data, 0o644)
				}
			}
			cfg, err := config.Load(tc.model)
			if err != nil {
				t.Fatal(err)
			}
			moe := 0
			for i := 0; i < cfg.NumHiddenLayers; i++ {
				if cfg.IsMoE(i) {
					moe++
				}
			}
			paneColor := magenta
			if tc.name == "readme" {
				paneColor = color.RGBA{} // a scene, not one colour: the centre is not checked
			}
			checkScreenshot(t, shot, moe, cfg.NumExperts, paneColor, tc.live)
			if tc.name == "readme" && os.Getenv("TESSERA_DESKTOP_README") == "write" && !t.Failed() {
				writeReadmeShot(t, shot)
			}
		})
	}
}

// checkScreenshot asserts the screenshot is a drawn window.
func checkScreenshot(t *testing.T, path string, moeLayers, experts int, imgColor color.RGBA, live bool) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot %s: %v", path, err)
	}
	if b := img.Bounds(); b.Dx() != WinW || b.Dy() != WinH {
		t.Fatalf("screenshot is %v, want %d×%d", b, WinW, WinH)
	}
	rgb := func(x, y int) color.RGBA {
		r, g, b, _ := img.At(x, y).RGBA()
		return color.RGBA{uint8(r >> 8), uint8(g >> 8), uint8(b >> 8), 0xff}
	}
	// Not blank: varied luminance and many colours.
	var sum, sum2 float64
	colors := map[color.RGBA]int{}
	for y := 0; y < WinH; y++ {
		for x := 0; x < WinW; x++ {
			c := rgb(x, y)
			l := 0.2126*float64(c.R) + 0.7152*float64(c.G) + 0.0722*float64(c.B)
			sum, sum2 = sum+l, sum2+l*l
			colors[c]++
		}
	}
	n := float64(WinW * WinH)
	mean := sum / n
	sd := sum2/n - mean*mean
	if sd < 0 {
		sd = 0
	}
	sd = math.Sqrt(sd)
	t.Logf("screenshot: mean luminance %.1f, stddev %.1f, %d colours", mean, sd, len(colors))
	if sd < 10 || len(colors) < 200 {
		t.Errorf("screenshot looks blank: luminance stddev %.1f (want ≥ 10), %d colours (want ≥ 200)", sd, len(colors))
	}
	// The heatmap's cells are drawn: most of the grid is not panel
	// background, and the cells use several colours.
	g := LayoutHeat(moeLayers, experts).Rect()
	if g.Empty() {
		t.Fatalf("no heatmap grid for %d MoE layers × %d experts", moeLayers, experts)
	}
	drawn, cells := 0, map[color.RGBA]bool{}
	for y := g.Min.Y; y < g.Max.Y; y++ {
		for x := g.Min.X; x < g.Max.X; x++ {
			c := rgb(x, y)
			if c != ColPanel && c != ColBG {
				drawn++
				cells[c] = true
			}
		}
	}
	frac := float64(drawn) / float64(g.Dx()*g.Dy())
	t.Logf("heatmap %v: %.0f%% drawn, %d colours", g, 100*frac, len(cells))
	if live && (frac < 0.6 || len(cells) < 4) {
		t.Errorf("heatmap region %v not drawn: %.0f%% non-background pixels (want ≥ 60%%), %d colours (want ≥ 4)", g, 100*frac, len(cells))
	}
	// The image pane shows the opened image (when imgColor is opaque).
	cx, cy := (ImageRect.Min.X+ImageRect.Max.X)/2, ImageRect.Min.Y+34+100
	if c := rgb(cx, cy); imgColor.A != 0 && !near(c, imgColor, 12) {
		t.Errorf("image pane centre (%d,%d) is %v, want the opened image's %v", cx, cy, c, imgColor)
	}
	// The output pane has text in it.
	out := OutputRect.Inset(22)
	text := 0
	for y := out.Min.Y; y < out.Min.Y+60; y++ {
		for x := out.Min.X; x < out.Max.X; x++ {
			if c := rgb(x, y); c.R > 0x60 {
				text++
			}
		}
	}
	if text < 100 {
		t.Errorf("output pane shows no text: %d bright pixels in its first lines", text)
	}
}

// near reports whether a and b differ by at most d per channel.
func near(a, b color.RGBA, d int) bool {
	abs := func(x int) int { return max(x, -x) }
	return abs(int(a.R)-int(b.R)) <= d && abs(int(a.G)-int(b.G)) <= d && abs(int(a.B)-int(b.B)) <= d
}
