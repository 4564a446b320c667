//go:build cgo || windows || darwin

package main

import (
	"bytes"
	"errors"
	"fmt"
	"github.com/tessera-llm/tessera/cmd/tessera-desktop/internal/desk"
	"image"
	"image/png"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/hajimehoshi/ebiten/v2"
	"github.com/hajimehoshi/ebiten/v2/inpututil"
)

// ui is the window's state. Update and Draw run on ebiten's goroutine; the
// generation runs elsewhere and is read through desk.Controller.Status and
// engine.LiveView.View.
type ui struct {
	a     *app
	f     *fonts
	frame int
	mouse image.Point

	prompt   []rune
	pathMode bool   // Ctrl+O: the prompt field asks for an image path
	path     []rune // the path being typed
	message  string // last error or notice, shown under the prompt
	msgErr   bool

	img    *desk.LoadedImage
	imgTex *ebiten.Image

	st          desk.Status
	outLines    []string // wrapped output
	outDone     int      // bytes of the output wrapped into outDoneLines
	outDoneL    []string // lines of the complete paragraphs
	outRun      int
	scroll      int  // first output line shown
	follow      bool // keep the newest line in view
	settings    desk.Settings
	scriptStart time.Time
	doneFrames  int
	capture     bool
	captured    bool
	fatal       error
}

// runWindow opens the window and runs until it closes (or, in scripted
// mode, until the screenshot is saved).
func runWindow(a *app) error {
	f, err := loadFonts()
	if err != nil {
		return err
	}
	u := &ui{a: a, f: f, follow: true, settings: a.opt.settings, prompt: []rune(a.opt.prompt)}
	a.ui = u
	if a.opt.image != "" {
		if err := u.openImage(a.opt.image); err != nil {
			if a.script {
				return err
			}
			u.setMessage(err.Error(), true)
		}
	}
	ebiten.SetWindowSize(desk.WinW, desk.WinH)
	ebiten.SetWindowTitle("tessera — " + filepath.Base(filepath.Clean(a.modelDir)))
	ebiten.SetWindowResizingMode(ebiten.WindowResizingModeEnabled)
	ebiten.SetRunnableOnUnfocused(true)
	if err := ebiten.RunGame(u); err != nil {
		return fmt.Errorf("window: %w", err)
	}
	if u.fatal == nil && a.script && !u.captured {
		return errNoOutput
	}
	return u.fatal
}

// Layout keeps a fixed logical size; ebiten scales it to the window.
func (u *ui) Layout(int, int) (int, int) { return desk.WinW, desk.WinH }

// setMessage shows a line under the prompt.
func (u *ui) setMessage(s string, isErr bool) { u.message, u.msgErr = s, isErr }

// openImage loads an image file into the image pane.
func (u *ui) openImage(path string) error {
	img, err := desk.LoadImageFile(path)
	if err != nil {
		return err
	}
	u.setImage(img)
	return nil
}

// setImage shows img in the image pane.
func (u *ui) setImage(img *desk.LoadedImage) {
	if u.imgTex != nil {
		u.imgTex.Deallocate()
	}
	u.img, u.imgTex = img, ebiten.NewImageFromImage(img.Img)
	u.setMessage(fmt.Sprintf("opened %s (%d×%d %s, %s)", img.Name, img.W, img.H, img.Format, img.Decoder), false)
}

// images is the opened image, when the model takes images.
func (u *ui) images() [][]byte {
	if u.img == nil || !u.a.backend.Vision() {
		return nil
	}
	return [][]byte{u.img.Data}
}

// send starts a generation with the prompt, image and settings.
func (u *ui) send() {
	if err := u.a.ctl.Start(string(u.prompt), u.images(), u.settings); err != nil {
		u.setMessage(err.Error(), true)
		return
	}
	u.follow, u.scroll = true, 0
	u.setMessage("", false)
}

// Update handles input and, in scripted mode, drives the script.
func (u *ui) Update() error {
	u.frame++
	x, y := ebiten.CursorPosition()
	u.mouse = image.Pt(x, y)
	u.st = u.a.ctl.Status(u.st.Version)
	if u.a.script {
		return u.updateScript()
	}
	u.handleDrops()
	u.handleKeys()
	u.handleMouse()
	return nil
}

// updateScript sends the prompt on the first frame, waits for the end of
// the generation and a few frames more, then asks Draw for the screenshot.
func (u *ui) updateScript() error {
	switch {
	case u.fatal != nil || u.captured:
		return ebiten.Termination
	case u.frame == 1:
		u.scriptStart = time.Now()
		if err := u.a.ctl.Start(string(u.prompt), u.images(), u.settings); err != nil {
			u.fatal = err
			return ebiten.Termination
		}
	case time.Since(u.scriptStart) > u.a.opt.timeout:
		u.a.ctl.Stop()
		u.a.ctl.Wait()
		u.fatal = fmt.Errorf("%w after %s (--timeout)", desk.ErrScriptTimeout, u.a.opt.timeout)
		return ebiten.Termination
	case !u.st.Running && u.st.Runs > 0:
		u.doneFrames++
		u.capture = u.doneFrames >= 3
	}
	return nil
}

// ctrl reports whether a Control (or, on macOS, Command) key is held.
func ctrl() bool {
	return ebiten.IsKeyPressed(ebiten.KeyControl) || ebiten.IsKeyPressed(ebiten.KeyMeta)
}

// repeat reports a key press, with auto-repeat while the key is held.
func repeat(k ebiten.Key) bool {
	d := inpututil.KeyPressDuration(k)
	return d == 1 || (d > 30 && d%3 == 0)
}

// handleKeys implements typing and the shortcuts.
func (u *ui) handleKeys() {
	field := &u.prompt
	if u.pathMode {
		field = &u.path
	}
	if !ctrl() {
		*field = ebiten.AppendInputChars(*field)
	}
	enter := inpututil.IsKeyJustPressed(ebiten.KeyEnter) || inpututil.IsKeyJustPressed(ebiten.KeyNumpadEnter)
	shift := ebiten.IsKeyPressed(ebiten.KeyShift)
	switch {
	case ctrl() && inpututil.IsKeyJustPressed(ebiten.KeyO):
		u.pathMode, u.path = true, nil
		if u.img != nil {
			u.path = []rune(u.img.Name)
		}
	case ctrl() && inpututil.IsKeyJustPressed(ebiten.KeyL):
		*field = (*field)[:0]
	case inpututil.IsKeyJustPressed(ebiten.KeyEscape):
		if u.pathMode {
			u.pathMode = false
		} else if u.st.Running {
			u.a.ctl.Stop()
		}
	case repeat(ebiten.KeyBackspace) && len(*field) > 0:
		*field = (*field)[:len(*field)-1]
	case enter && u.pathMode:
		p := strings.TrimSpace(string(u.path))
		if err := u.openImage(expandHome(p)); err != nil {
			u.setMessage(err.Error(), true)
		} else {
			u.pathMode = false
		}
	case enter && shift:
		*field = append(*field, '\n')
	case enter:
		u.send()
	}
	if _, dy := ebiten.Wheel(); dy != 0 && u.mouse.In(desk.OutputRect) {
		u.scroll -= int(dy * 3)
		u.follow = false
	}
	if _, dy := ebiten.Wheel(); dy != 0 {
		for i, row := range settingRows {
			if u.mouse.In(settingRowRect(i)) {
				u.adjust(row, dy > 0)
			}
		}
	}
}

// expandHome replaces a leading ~/ with the home directory.
func expandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if h, err := os.UserHomeDir(); err == nil {
			return filepath.Join(h, rest)
		}
	}
	return p
}

// handleDrops opens the first image file dropped on the window.
func (u *ui) handleDrops() {
	files := ebiten.DroppedFiles()
	if files == nil {
		return
	}
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		u.setMessage("reading the dropped files: "+err.Error(), true)
		return
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		fh, err := files.Open(e.Name())
		if err != nil {
			u.setMessage(fmt.Sprintf("opening dropped %s: %v", e.Name(), err), true)
			return
		}
		data, err := io.ReadAll(io.LimitReader(fh, 256<<20))
		fh.Close()
		if err != nil {
			u.setMessage(fmt.Sprintf("reading dropped %s: %v", e.Name(), err), true)
			return
		}
		img, err := desk.DecodeImage(e.Name(), bytes.NewReader(data))
		if err != nil {
			u.setMessage(err.Error(), true)
			return
		}
		u.setImage(img)
		return
	}
	u.setMessage("the dropped item has no file in it", true)
}

// buttons of the prompt panel.
var (
	sendRect  = image.Rect(desk.PromptRect.Max.X-12-84, desk.PromptRect.Max.Y-40, desk.PromptRect.Max.X-12, desk.PromptRect.Max.Y-12)
	stopRect  = image.Rect(sendRect.Min.X-8-84, sendRect.Min.Y, sendRect.Min.X-8, sendRect.Max.Y)
	openRect  = image.Rect(desk.ImageRect.Max.X-12-112, desk.ImageRect.Min.Y+6, desk.ImageRect.Max.X-12, desk.ImageRect.Min.Y+30)
	fieldRect = image.Rect(desk.PromptRect.Min.X+12, desk.PromptRect.Min.Y+34, desk.PromptRect.Max.X-12, desk.PromptRect.Max.Y-48)
)

// handleMouse implements the buttons.
func (u *ui) handleMouse() {
	if !inpututil.IsMouseButtonJustPressed(ebiten.MouseButtonLeft) {
		return
	}
	m := u.mouse
	switch {
	case m.In(sendRect) && !u.st.Running:
		if u.pathMode {
			u.pathMode = false
		}
		u.send()
	case m.In(stopRect) && u.st.Running:
		u.a.ctl.Stop()
	case m.In(openRect):
		u.pathMode, u.path = true, nil
	case m.In(desk.OutputRect):
		u.follow = false
	}
	for i, row := range settingRows {
		minus, plus := settingButtons(i)
		if m.In(minus) {
			u.adjust(row, false)
		} else if m.In(plus) {
			u.adjust(row, true)
		}
	}
}

// settingRow is one adjustable setting.
type settingRow int

const (
	setTemperature settingRow = iota
	setTopP
	setMaxTokens
	setSeed
)

var settingRows = []settingRow{setTemperature, setTopP, setMaxTokens, setSeed}

// settingRowRect is the rectangle of row i of the settings panel.
func settingRowRect(i int) image.Rectangle {
	y := desk.SettingsRect.Min.Y + 36 + i*34
	return image.Rect(desk.SettingsRect.Min.X+12, y, desk.SettingsRect.Max.X-12, y+28)
}

// settingButtons are row i's − and + buttons.
func settingButtons(i int) (minus, plus image.Rectangle) {
	r := settingRowRect(i)
	plus = image.Rect(r.Max.X-28, r.Min.Y, r.Max.X, r.Max.Y)
	minus = image.Rect(r.Max.X-28-8-90-8-28, r.Min.Y, r.Max.X-28-8-90-8, r.Max.Y)
	return minus, plus
}

// adjust steps a setting up or down within its range.
func (u *ui) adjust(row settingRow, up bool) {
	s := &u.settings
	sign := float32(-1)
	if up {
		sign = 1
	}
	round := func(x, q float32) float32 { return float32(math.Round(float64(x/q))) * q }
	switch row {
	case setTemperature:
		s.Sampler.Temperature = min(2, max(0, round(s.Sampler.Temperature+0.1*sign, 0.05)))
	case setTopP:
		s.Sampler.TopP = min(1, max(0.05, round(s.Sampler.TopP+0.05*sign, 0.05)))
	case setMaxTokens:
		v := s.MaxTokens
		if !up {
			v--
		}
		step := 256
		switch {
		case v < 64:
			step = 8
		case v < 512:
			step = 32
		}
		if up {
			s.MaxTokens = min(8192, s.MaxTokens+step)
		} else {
			s.MaxTokens = max(1, s.MaxTokens-step)
		}
	case setSeed:
		if up {
			s.Sampler.Seed++
		} else if s.Sampler.Seed > 0 {
			s.Sampler.Seed--
		}
	}
}

// Draw draws the window and, in scripted mode, saves the screenshot.
func (u *ui) Draw(screen *ebiten.Image) {
	screen.Fill(colBG)
	u.drawHeader(screen)
	u.drawImagePane(screen)
	u.drawSettings(screen)
	u.drawStats(screen)
	u.drawPrompt(screen)
	u.drawOutput(screen)
	view := u.a.live.View()
	u.drawHeatmap(screen, &view)
	u.drawKDA(screen, &view)
	u.drawCache(screen, &view)
	if u.capture && !u.captured && u.fatal == nil {
		u.captured = true
		if err := saveScreenshot(screen, u.a.opt.screenshot); err != nil {
			u.fatal = err
		}
	}
}

// saveScreenshot writes the screen as a PNG file.
func saveScreenshot(screen *ebiten.Image, path string) error {
	b := screen.Bounds()
	img := image.NewRGBA(image.Rect(0, 0, b.Dx(), b.Dy()))
	screen.ReadPixels(img.Pix)
	for i := 3; i < len(img.Pix); i += 4 {
		img.Pix[i] = 0xff // the window is opaque
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		return fmt.Errorf("encoding the screenshot: %w", err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the screenshot: %w", err)
	}
	return nil
}

// errNoOutput is returned when the window closed before anything ran.
var errNoOutput = errors.New("the window closed before the generation finished")
