package desk

import (
	"image"
	"image/color"
)

// The window's logical size and panel rectangles. They live outside the
// ebiten code so that the tests can find the regions in a screenshot.
const (
	WinW = 1280
	WinH = 800
)

// ColBG and ColPanel are the window and panel backgrounds.
var (
	ColBG    = color.RGBA{0x10, 0x12, 0x17, 0xff}
	ColPanel = color.RGBA{0x19, 0x1c, 0x23, 0xff}
)

// The panels.
var (
	HeaderRect   = image.Rect(0, 0, WinW, 48)
	ImageRect    = image.Rect(12, 60, 328, 360)
	SettingsRect = image.Rect(12, 372, 328, 552)
	StatsRect    = image.Rect(12, 564, 328, 788)
	PromptRect   = image.Rect(340, 60, 824, 210)
	OutputRect   = image.Rect(340, 222, 824, 788)
	HeatRect     = image.Rect(836, 60, 1268, 402)
	KdaRect      = image.Rect(836, 414, 1268, 600)
	CacheRect    = image.Rect(836, 612, 1268, 788)
)

// HeatGrid is the layout of the routing heatmap inside HeatRect: cols×rows
// cells of cw×ch pixels at Min. Experts and layers are binned when there are
// more of them than pixels.
type HeatGrid struct {
	Min          image.Point
	Cols, Rows   int
	CW, CH       int
	Experts, MoE int
}

// Rect is the rectangle the cells cover.
func (g HeatGrid) Rect() image.Rectangle {
	return image.Rectangle{Min: g.Min, Max: g.Min.Add(image.Pt(g.Cols*g.CW, g.Rows*g.CH))}
}

// LayoutHeat places a grid for moeLayers rows × experts columns.
func LayoutHeat(moeLayers, experts int) HeatGrid {
	area := image.Rect(HeatRect.Min.X+64, HeatRect.Min.Y+60, HeatRect.Max.X-62, HeatRect.Max.Y-90)
	g := HeatGrid{Min: area.Min, Experts: experts, MoE: moeLayers}
	if moeLayers <= 0 || experts <= 0 {
		return g
	}
	g.Cols, g.Rows = min(experts, area.Dx()), min(moeLayers, area.Dy())
	g.CW, g.CH = area.Dx()/g.Cols, min(area.Dy()/g.Rows, 56)
	return g
}
