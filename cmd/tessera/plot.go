package main

import (
	"fmt"
	"image"
	"image/color"
	"image/draw"
	"image/png"
	"math"
	"os"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// Small PNG charts for `tessera bench --plot`: no plotting library, just
// lines, bars and a bitmap font.

var (
	plotBG    = color.RGBA{0xff, 0xff, 0xff, 0xff}
	plotInk   = color.RGBA{0x22, 0x22, 0x2a, 0xff}
	plotGrid  = color.RGBA{0xe4, 0xe6, 0xeb, 0xff}
	plotColor = []color.RGBA{{0x3b, 0x6e, 0xdc, 0xff}, {0xe0, 0x6c, 0x2e, 0xff}, {0x2e, 0xa0, 0x5a, 0xff}, {0x9b, 0x4d, 0xca, 0xff}}
)

type canvas struct{ *image.RGBA }

func newCanvas(w, h int) canvas {
	c := canvas{image.NewRGBA(image.Rect(0, 0, w, h))}
	draw.Draw(c.RGBA, c.Bounds(), &image.Uniform{plotBG}, image.Point{}, draw.Src)
	return c
}

func (c canvas) text(x, y int, s string, col color.Color) {
	d := font.Drawer{Dst: c.RGBA, Src: &image.Uniform{col}, Face: basicfont.Face7x13, Dot: fixed.P(x, y)}
	d.DrawString(s)
}

func textWidth(s string) int { return 7 * len([]rune(s)) }

func (c canvas) rect(r image.Rectangle, col color.Color) {
	draw.Draw(c.RGBA, r, &image.Uniform{col}, image.Point{}, draw.Src)
}

// line draws a 2-px line from (x0,y0) to (x1,y1).
func (c canvas) line(x0, y0, x1, y1 int, col color.RGBA) {
	n := max(abs(x1-x0), abs(y1-y0), 1)
	for i := 0; i <= n; i++ {
		x := x0 + (x1-x0)*i/n
		y := y0 + (y1-y0)*i/n
		c.rect(image.Rect(x, y, x+2, y+2), col)
	}
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

func (c canvas) save(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, c.RGBA); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return f.Close()
}

// plotSeries is one line of a lineChart.
type plotSeries struct {
	Name string
	Y    []float64
}

// lineChart plots series over xs on log-log axes (both must be positive).
func lineChart(path, title, xLabel string, xs []float64, xNames []string, series []plotSeries) error {
	const W, H, L, R, T, B = 720, 420, 80, 150, 40, 50
	c := newCanvas(W, H)
	c.text(L, 24, title, plotInk)
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range series {
		for _, v := range s.Y {
			if v > 0 {
				lo, hi = math.Min(lo, v), math.Max(hi, v)
			}
		}
	}
	if math.IsInf(lo, 0) {
		return fmt.Errorf("%s: nothing to plot", path)
	}
	ylo, yhi := math.Floor(math.Log10(lo)), math.Ceil(math.Log10(hi))
	if yhi == ylo {
		yhi++
	}
	xlo, xhi := math.Log10(xs[0]), math.Log10(xs[len(xs)-1])
	if xhi == xlo {
		xhi = xlo + 1
	}
	px := func(x float64) int { return L + int((math.Log10(x)-xlo)/(xhi-xlo)*float64(W-L-R)) }
	py := func(y float64) int { return H - B - int((math.Log10(y)-ylo)/(yhi-ylo)*float64(H-T-B)) }
	for e := ylo; e <= yhi; e++ {
		y := py(math.Pow(10, e))
		c.rect(image.Rect(L, y, W-R, y+1), plotGrid)
		lab := fmt.Sprintf("1e%d", int(e))
		c.text(L-8-textWidth(lab), y+4, lab, plotInk)
	}
	for i, x := range xs {
		c.rect(image.Rect(px(x), T, px(x)+1, H-B), plotGrid)
		c.text(px(x)-textWidth(xNames[i])/2, H-B+16, xNames[i], plotInk)
	}
	c.text((L+W-R)/2-textWidth(xLabel)/2, H-12, xLabel, plotInk)
	for k, s := range series {
		col := plotColor[k%len(plotColor)]
		for i := 1; i < len(s.Y) && i < len(xs); i++ {
			if s.Y[i-1] > 0 && s.Y[i] > 0 {
				c.line(px(xs[i-1]), py(s.Y[i-1]), px(xs[i]), py(s.Y[i]), col)
			}
		}
		for i, v := range s.Y {
			if v > 0 && i < len(xs) {
				c.rect(image.Rect(px(xs[i])-3, py(v)-3, px(xs[i])+4, py(v)+4), col)
			}
		}
		c.rect(image.Rect(W-R+12, T+20*k, W-R+24, T+20*k+12), col)
		c.text(W-R+30, T+20*k+11, s.Name, plotInk)
	}
	return c.save(path)
}

// barChart draws horizontal bars (values ≥ 0) with their labels and a unit.
func barChart(path, title string, labels []string, values []float64, unit string) error {
	const W, L, R, T, rowH = 720, 120, 110, 44, 26
	H := T + rowH*len(labels) + 20
	c := newCanvas(W, H)
	c.text(12, 24, title, plotInk)
	top := 0.0
	for _, v := range values {
		top = math.Max(top, v)
	}
	if top <= 0 {
		top = 1
	}
	for i, v := range values {
		y := T + i*rowH
		c.text(L-10-textWidth(labels[i]), y+15, labels[i], plotInk)
		w := int(v / top * float64(W-L-R))
		c.rect(image.Rect(L, y+4, L+max(w, 1), y+rowH-4), plotColor[0])
		c.text(L+w+8, y+15, fmt.Sprintf("%.3g %s", v, unit), plotInk)
	}
	return c.save(path)
}
