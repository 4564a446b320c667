//go:build cgo || windows || darwin

package main

import (
	"bytes"
	"fmt"
	"github.com/tessera-llm/tessera/cmd/tessera-desktop/internal/desk"
	"image"
	"image/color"
	"strings"
	"unicode/utf8"

	"github.com/hajimehoshi/ebiten/v2"
	"github.com/hajimehoshi/ebiten/v2/text/v2"
	"github.com/hajimehoshi/ebiten/v2/vector"
	"golang.org/x/image/font/gofont/gobold"
	"golang.org/x/image/font/gofont/gomono"
	"golang.org/x/image/font/gofont/goregular"
)

// The palette: a dark theme with one accent, amber for the CPU notice.
var (
	colBG       = desk.ColBG
	colPanel    = desk.ColPanel
	colBorder   = color.RGBA{0x2a, 0x2f, 0x3a, 0xff}
	colField    = color.RGBA{0x0d, 0x0f, 0x13, 0xff}
	colText     = color.RGBA{0xe4, 0xe7, 0xec, 0xff}
	colMuted    = color.RGBA{0x8a, 0x93, 0xa3, 0xff}
	colDim      = color.RGBA{0x5a, 0x61, 0x6e, 0xff}
	colAccent   = color.RGBA{0x4d, 0xa3, 0xff, 0xff}
	colAmber    = color.RGBA{0xf2, 0xb3, 0x3d, 0xff}
	colRed      = color.RGBA{0xff, 0x6b, 0x6b, 0xff}
	colGreen    = color.RGBA{0x4c, 0xd1, 0x8a, 0xff}
	colButton   = color.RGBA{0x26, 0x2b, 0x35, 0xff}
	colButtonHi = color.RGBA{0x30, 0x37, 0x44, 0xff}
)

// fonts are the faces the UI draws with (Go fonts through text/v2).
type fonts struct {
	ui, small, bold, title, mono, big text.Face
}

// loadFonts parses the embedded Go fonts.
func loadFonts() (*fonts, error) {
	src := func(name string, ttf []byte) (*text.GoTextFaceSource, error) {
		s, err := text.NewGoTextFaceSource(bytes.NewReader(ttf))
		if err != nil {
			return nil, fmt.Errorf("loading the %s font: %w", name, err)
		}
		return s, nil
	}
	reg, err := src("Go Regular", goregular.TTF)
	if err != nil {
		return nil, err
	}
	bold, err := src("Go Bold", gobold.TTF)
	if err != nil {
		return nil, err
	}
	mono, err := src("Go Mono", gomono.TTF)
	if err != nil {
		return nil, err
	}
	return &fonts{
		ui:    &text.GoTextFace{Source: reg, Size: 14},
		small: &text.GoTextFace{Source: reg, Size: 12},
		bold:  &text.GoTextFace{Source: bold, Size: 14},
		title: &text.GoTextFace{Source: bold, Size: 18},
		mono:  &text.GoTextFace{Source: mono, Size: 14},
		big:   &text.GoTextFace{Source: bold, Size: 22},
	}, nil
}

// lineHeight is the distance between baselines of face.
func lineHeight(face text.Face) float64 {
	m := face.Metrics()
	return m.HAscent + m.HDescent + m.HLineGap
}

// drawText draws s with its top-left corner at (x, y).
func drawText(dst *ebiten.Image, s string, face text.Face, x, y float64, c color.Color) {
	op := &text.DrawOptions{}
	op.GeoM.Translate(x, y)
	op.ColorScale.ScaleWithColor(c)
	text.Draw(dst, s, face, op)
}

// drawTextRight draws s ending at x.
func drawTextRight(dst *ebiten.Image, s string, face text.Face, x, y float64, c color.Color) {
	drawText(dst, s, face, x-text.Advance(s, face), y, c)
}

// drawTextCenter draws s centred in r vertically and horizontally.
func drawTextCenter(dst *ebiten.Image, s string, face text.Face, r image.Rectangle, c color.Color) {
	w := text.Advance(s, face)
	h := face.Metrics().HAscent + face.Metrics().HDescent
	drawText(dst, s, face, float64(r.Min.X)+(float64(r.Dx())-w)/2, float64(r.Min.Y)+(float64(r.Dy())-h)/2, c)
}

// fillRect fills r.
func fillRect(dst *ebiten.Image, r image.Rectangle, c color.Color) {
	vector.FillRect(dst, float32(r.Min.X), float32(r.Min.Y), float32(r.Dx()), float32(r.Dy()), c, false)
}

// strokeRect outlines r with a line of width w inside it.
func strokeRect(dst *ebiten.Image, r image.Rectangle, w float32, c color.Color) {
	vector.StrokeRect(dst, float32(r.Min.X)+w/2, float32(r.Min.Y)+w/2, float32(r.Dx())-w, float32(r.Dy())-w, w, c, true)
}

// roundRect fills (and, when border is not nil, outlines) r with corners of
// radius rad.
func roundRect(dst *ebiten.Image, r image.Rectangle, rad float32, fill, border color.Color) {
	var p vector.Path
	x0, y0, x1, y1 := float32(r.Min.X), float32(r.Min.Y), float32(r.Max.X), float32(r.Max.Y)
	p.MoveTo(x0+rad, y0)
	p.ArcTo(x1, y0, x1, y1, rad)
	p.ArcTo(x1, y1, x0, y1, rad)
	p.ArcTo(x0, y1, x0, y0, rad)
	p.ArcTo(x0, y0, x1, y0, rad)
	p.Close()
	dop := &vector.DrawPathOptions{AntiAlias: true}
	dop.ColorScale.ScaleWithColor(fill)
	vector.FillPath(dst, &p, nil, dop)
	if border != nil {
		sop := &vector.StrokeOptions{Width: 1}
		dop := &vector.DrawPathOptions{AntiAlias: true}
		dop.ColorScale.ScaleWithColor(border)
		vector.StrokePath(dst, &p, sop, dop)
	}
}

// panel draws a titled panel and returns its content rectangle.
func (f *fonts) panel(dst *ebiten.Image, r image.Rectangle, title string) image.Rectangle {
	roundRect(dst, r, 8, colPanel, colBorder)
	if title != "" {
		drawText(dst, title, f.bold, float64(r.Min.X+12), float64(r.Min.Y+9), colText)
	}
	return image.Rect(r.Min.X+12, r.Min.Y+34, r.Max.X-12, r.Max.Y-10)
}

// button draws a button and reports whether the mouse is over it.
func (f *fonts) button(dst *ebiten.Image, r image.Rectangle, label string, enabled, primary bool, mouse image.Point) bool {
	hover := enabled && mouse.In(r)
	bg, fg := colButton, colText
	switch {
	case !enabled:
		fg = colDim
	case primary && hover:
		bg, fg = color.RGBA{0x6b, 0xb4, 0xff, 0xff}, colBG
	case primary:
		bg, fg = colAccent, colBG
	case hover:
		bg = colButtonHi
	}
	roundRect(dst, r, 6, bg, nil)
	drawTextCenter(dst, label, f.ui, r, fg)
	return hover
}

// printable makes model output drawable: tabs become spaces, control
// characters caret notation, invalid UTF-8 U+FFFD.
func printable(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		i += n
		switch {
		case r == '\n':
			b.WriteByte('\n')
		case r == '\t':
			b.WriteString("    ")
		case r < 0x20 || r == 0x7f:
			b.WriteByte('^')
			b.WriteByte(byte(r) ^ 0x40)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// wrap breaks s into lines no wider than width: at spaces when it can,
// inside words when it must.
func wrap(s string, face text.Face, width float64) []string {
	var out []string
	for _, para := range strings.Split(s, "\n") {
		out = wrapPara(out, para, face, width)
	}
	return out
}

// wrapPara appends the wrapped lines of one paragraph (no newlines) to out.
func wrapPara(out []string, para string, face text.Face, width float64) []string {
	line, lineW := "", 0.0
	for _, word := range splitKeepSpaces(para) {
		ww := text.Advance(word, face)
		if lineW+ww <= width {
			line, lineW = line+word, lineW+ww
			continue
		}
		if line != "" {
			out = append(out, line)
			word = strings.TrimLeft(word, " ")
		}
		for {
			n := fitRunes(word, face, width)
			if n == len(word) {
				break
			}
			out = append(out, word[:n])
			word = word[n:]
		}
		line, lineW = word, text.Advance(word, face)
	}
	return append(out, line)
}

// splitKeepSpaces splits s into words, each carrying its leading spaces.
func splitKeepSpaces(s string) []string {
	var out []string
	start := 0
	for i := 1; i < len(s); i++ {
		if s[i] == ' ' && s[i-1] != ' ' {
			out = append(out, s[start:i])
			start = i
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// fitRunes is the byte length of the longest prefix of s (at least one
// rune, cut at a rune boundary) no wider than width, found by bisection.
func fitRunes(s string, face text.Face, width float64) int {
	if lim := 2*int(width) + 8; len(s) > lim {
		for lim > 0 && !utf8.RuneStart(s[lim]) {
			lim--
		}
		s = s[:lim] // glyphs are at least 2 px wide: the cut lies beyond the line
	}
	if text.Advance(s, face) <= width {
		return len(s)
	}
	lo, hi := 0, len(s) // Advance(s[:lo]) ≤ width < Advance(s[:hi])
	for hi-lo > 1 {
		mid := (lo + hi) / 2
		for mid > lo && !utf8.RuneStart(s[mid]) {
			mid--
		}
		if mid == lo {
			mid = (lo + hi) / 2
			for mid < hi && !utf8.RuneStart(s[mid]) {
				mid++
			}
			if mid == hi {
				break
			}
		}
		if text.Advance(s[:mid], face) <= width {
			lo = mid
		} else {
			hi = mid
		}
	}
	if lo == 0 {
		_, lo = utf8.DecodeRuneInString(s)
	}
	return lo
}

// heatColor maps a load fraction to the heatmap's colour: load 0 is dark
// blue, the Quantile Balancing target is teal, twice the target and above
// are orange-red.
func heatColor(load, target float64) color.RGBA {
	stops := []struct {
		at float64
		c  color.RGBA
	}{
		{0, color.RGBA{0x1d, 0x2b, 0x4f, 0xff}},
		{0.5, color.RGBA{0x2a, 0xa1, 0x98, 0xff}},
		{0.75, color.RGBA{0xe9, 0xc4, 0x6a, 0xff}},
		{1, color.RGBA{0xf2, 0x5f, 0x4c, 0xff}},
	}
	v := 0.0
	if target > 0 {
		v = min(1, max(0, load/(2*target)))
	}
	for i := 1; i < len(stops); i++ {
		if v <= stops[i].at {
			a, b := stops[i-1], stops[i]
			t := (v - a.at) / (b.at - a.at)
			mix := func(x, y uint8) uint8 { return uint8(float64(x) + (float64(y)-float64(x))*t + 0.5) }
			return color.RGBA{mix(a.c.R, b.c.R), mix(a.c.G, b.c.G), mix(a.c.B, b.c.B), 0xff}
		}
	}
	return stops[len(stops)-1].c
}

// humanBytes formats a byte count.
func humanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
