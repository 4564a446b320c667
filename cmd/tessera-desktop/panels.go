//go:build cgo || windows || darwin

package main

import (
	"fmt"
	"github.com/tessera-llm/tessera/cmd/tessera-desktop/internal/desk"
	"github.com/tessera-llm/tessera/core/engine"
	"image"
	"image/color"
	"math"
	"path/filepath"
	"strings"
	"time"

	"github.com/hajimehoshi/ebiten/v2"
	"github.com/hajimehoshi/ebiten/v2/text/v2"
	"github.com/hajimehoshi/ebiten/v2/vector"
	"github.com/tessera-llm/tessera/core/config"
)

// drawHeader draws the title, the model and the backend badge.
func (u *ui) drawHeader(dst *ebiten.Image) {
	fillRect(dst, desk.HeaderRect, colPanel)
	fillRect(dst, image.Rect(0, desk.HeaderRect.Max.Y-1, desk.WinW, desk.HeaderRect.Max.Y), colBorder)
	drawText(dst, "tessera", u.f.title, 16, 13, colText)
	x := 16 + text.Advance("tessera", u.f.title) + 6
	drawText(dst, "desktop", u.f.title, x, 13, colAccent)
	x += text.Advance("desktop", u.f.title) + 22
	cfg := u.a.backend.Config()
	model := fmt.Sprintf("%s · %d layers · %d experts top-%d · vocab %d · %s",
		filepath.Base(filepath.Clean(u.a.modelDir)), cfg.NumHiddenLayers, cfg.NumExperts, cfg.TopK, cfg.VocabSize, u.a.codec.Name())
	drawText(dst, model, u.f.ui, x, 16, colMuted)
	if n := u.a.backend.Notice(); n != "" {
		w := int(text.Advance(n, u.f.ui)) + 28
		r := image.Rect(desk.WinW-16-w, 10, desk.WinW-16, 38)
		roundRect(dst, r, 14, color.RGBA{0x3a, 0x2d, 0x10, 0xff}, colAmber)
		vector.FillCircle(dst, float32(r.Min.X+13), float32(r.Min.Y+14), 4, colAmber, true)
		drawText(dst, n, u.f.ui, float64(r.Min.X+22), float64(r.Min.Y+6), colAmber)
	}
}

// drawImagePane draws the opened image, scaled to fit, and its notice.
func (u *ui) drawImagePane(dst *ebiten.Image) {
	c := u.f.panel(dst, desk.ImageRect, "Image")
	u.f.button(dst, openRect, "Open…  Ctrl+O", true, false, u.mouse)
	box := image.Rect(c.Min.X, c.Min.Y+2, c.Max.X, c.Max.Y-44)
	fillRect(dst, box, colField)
	if u.imgTex == nil {
		strokeRect(dst, box, 1, colBorder)
		drawTextCenter(dst, "Drop a PNG or JPEG here", u.f.ui, box.Sub(image.Pt(0, 10)), colMuted)
		drawTextCenter(dst, "or press Ctrl+O to type a path", u.f.small, box.Add(image.Pt(0, 12)), colDim)
	} else {
		b := u.imgTex.Bounds()
		s := min(float64(box.Dx())/float64(b.Dx()), float64(box.Dy())/float64(b.Dy()))
		op := &ebiten.DrawImageOptions{Filter: ebiten.FilterLinear}
		op.GeoM.Scale(s, s)
		op.GeoM.Translate(float64(box.Min.X)+(float64(box.Dx())-s*float64(b.Dx()))/2, float64(box.Min.Y)+(float64(box.Dy())-s*float64(b.Dy()))/2)
		dst.DrawImage(u.imgTex, op)
	}
	y := float64(box.Max.Y + 6)
	vision := u.a.backend.Vision()
	switch {
	case u.img != nil && vision:
		drawText(dst, fmt.Sprintf("%s · %d×%d %s", u.img.Name, u.img.W, u.img.H, u.img.Format), u.f.small, float64(c.Min.X), y, colText)
		vector.FillCircle(dst, float32(c.Min.X+4), float32(y+26), 3.5, colGreen, true)
		drawText(dst, "goes to the vision tower with the prompt", u.f.small, float64(c.Min.X+12), y+18, colGreen)
	case u.img != nil:
		drawText(dst, fmt.Sprintf("%s · %d×%d %s", u.img.Name, u.img.W, u.img.H, u.img.Format), u.f.small, float64(c.Min.X), y, colText)
		vector.FillCircle(dst, float32(c.Min.X+4), float32(y+26), 3.5, colAmber, true)
		drawText(dst, "this model has no vision tower: image not used", u.f.small, float64(c.Min.X+12), y+18, colAmber)
	case vision:
		drawText(dst, "Open an image (Ctrl+O) or drop one here:", u.f.small, float64(c.Min.X), y, colDim)
		drawText(dst, "it is encoded and placed before the prompt.", u.f.small, float64(c.Min.X), y+18, colDim)
	default:
		drawText(dst, "This model has no vision tower: images are", u.f.small, float64(c.Min.X), y, colDim)
		drawText(dst, "shown, not used.", u.f.small, float64(c.Min.X), y+18, colDim)
	}
}

// drawSettings draws the sampling settings with − and + buttons.
func (u *ui) drawSettings(dst *ebiten.Image) {
	u.f.panel(dst, desk.SettingsRect, "Settings")
	drawTextRight(dst, "click ± or scroll", u.f.small, float64(desk.SettingsRect.Max.X-12), float64(desk.SettingsRect.Min.Y+11), colDim)
	s := u.settings
	for i, row := range settingRows {
		r := settingRowRect(i)
		var label, val string
		switch row {
		case setTemperature:
			label, val = "Temperature", fmt.Sprintf("%.2f", s.Sampler.Temperature)
			if s.Sampler.Temperature == 0 {
				val = "0 (greedy)"
			}
		case setTopP:
			label, val = "Top-p", fmt.Sprintf("%.2f", s.Sampler.TopP)
		case setMaxTokens:
			label, val = "Max tokens", fmt.Sprint(s.MaxTokens)
		case setSeed:
			label, val = "Seed", fmt.Sprint(s.Sampler.Seed)
		}
		drawText(dst, label, u.f.ui, float64(r.Min.X), float64(r.Min.Y+6), colText)
		minus, plus := settingButtons(i)
		u.f.button(dst, minus, "−", true, false, u.mouse)
		u.f.button(dst, plus, "+", true, false, u.mouse)
		vr := image.Rect(minus.Max.X+8, r.Min.Y, plus.Min.X-8, r.Max.Y)
		roundRect(dst, vr, 6, colField, colBorder)
		drawTextCenter(dst, val, u.f.mono, vr, colText)
	}
}

// drawStats draws time to first token, tokens/s and the counts.
func (u *ui) drawStats(dst *ebiten.Image) {
	c := u.f.panel(dst, desk.StatsRect, "Speed")
	st := u.st
	big := func(x int, label, val, unit string) {
		drawText(dst, label, u.f.small, float64(x), float64(c.Min.Y), colMuted)
		drawText(dst, val, u.f.big, float64(x), float64(c.Min.Y+16), colText)
		drawText(dst, unit, u.f.small, float64(x)+text.Advance(val, u.f.big)+4, float64(c.Min.Y+25), colMuted)
	}
	ttft, rate := "—", "—"
	if st.TTFT > 0 {
		ttft = fmt.Sprintf("%.0f", float64(st.TTFT.Microseconds())/1000)
		rate = fmt.Sprintf("%.1f", st.TokPerSec)
	}
	big(c.Min.X, "time to first token", ttft, "ms")
	big(c.Min.X+c.Dx()/2+4, "decode speed", rate, "tok/s")
	y := float64(c.Min.Y + 60)
	row := func(label, val string, col color.Color) {
		drawText(dst, label, u.f.ui, float64(c.Min.X), y, colMuted)
		drawTextRight(dst, val, u.f.mono, float64(c.Max.X), y, col)
		y += 22
	}
	state, col := "idle", colMuted
	switch {
	case st.Running && st.Generated == 0:
		state, col = "prefilling…", colAccent
	case st.Running:
		state, col = "generating…", colAccent
	case st.Err != nil:
		state, col = "error", colRed
	case st.Stopped:
		state, col = "stopped", colAmber
	case st.Runs > 0:
		state, col = "done", colGreen
	}
	row("status", state, col)
	row("prompt tokens", fmt.Sprint(st.Prompt), colText)
	row("generated tokens", fmt.Sprint(st.Generated), colText)
	row("elapsed", st.Elapsed.Round(time.Millisecond).String(), colText)
	row("backend", u.a.backend.Name(), colAmber)
}

// drawPrompt draws the prompt field (or the image-path field) and buttons.
func (u *ui) drawPrompt(dst *ebiten.Image) {
	u.f.panel(dst, desk.PromptRect, "Prompt")
	hint := "Enter send · Shift+Enter new line · Esc stop · Ctrl+O image"
	drawTextRight(dst, hint, u.f.small, float64(desk.PromptRect.Max.X-12), float64(desk.PromptRect.Min.Y+11), colDim)
	border := color.Color(colBorder)
	field, placeholder := string(u.prompt), "Type a prompt and press Enter"
	if u.pathMode {
		border, field, placeholder = colAccent, "Image path: "+string(u.path), ""
	}
	roundRect(dst, fieldRect, 6, colField, border)
	inner := fieldRect.Inset(8)
	lh := lineHeight(u.f.mono)
	lines := wrap(printable(field), u.f.mono, float64(inner.Dx()-8))
	maxLines := max(1, int(float64(inner.Dy())/lh))
	if len(lines) > maxLines {
		lines = lines[len(lines)-maxLines:]
	}
	if field == "" {
		drawText(dst, placeholder, u.f.mono, float64(inner.Min.X), float64(inner.Min.Y), colDim)
	}
	for i, l := range lines {
		drawText(dst, l, u.f.mono, float64(inner.Min.X), float64(inner.Min.Y)+float64(i)*lh, colText)
	}
	if !u.a.script && (u.frame/30)%2 == 0 {
		last := lines[len(lines)-1]
		cx := float32(float64(inner.Min.X) + text.Advance(last, u.f.mono) + 1)
		cy := float32(float64(inner.Min.Y) + float64(len(lines)-1)*lh)
		vector.FillRect(dst, cx, cy+2, 2, float32(lh)-4, colAccent, false)
	}
	if u.message != "" {
		col := colMuted
		if u.msgErr {
			col = colRed
		}
		msg := u.message
		for len(msg) > 0 && text.Advance(msg, u.f.small) > float64(stopRect.Min.X-fieldRect.Min.X-12) {
			msg = msg[:len(msg)-1]
		}
		if msg != u.message {
			msg = strings.TrimRight(msg, " ") + "…"
		}
		drawText(dst, msg, u.f.small, float64(fieldRect.Min.X), float64(sendRect.Min.Y+7), col)
	}
	u.f.button(dst, stopRect, "Stop  Esc", u.st.Running, false, u.mouse)
	u.f.button(dst, sendRect, "Send  Enter", !u.st.Running, true, u.mouse)
}

// outputText returns the wrapped output, re-wrapping only the paragraph
// that is still growing.
func (u *ui) outputText(width float64) []string {
	if u.st.Runs != u.outRun {
		u.outRun, u.outDone, u.outDoneL, u.outLines = u.st.Runs, 0, nil, nil
	}
	if u.st.Text == "" { // unchanged since the last frame
		return u.outLines
	}
	t := u.st.Text
	if len(t) < u.outDone {
		u.outDone, u.outDoneL = 0, nil
	}
	if nl := strings.LastIndexByte(t, '\n'); nl+1 > u.outDone {
		u.outDoneL = append(u.outDoneL, wrap(printable(t[u.outDone:nl]), u.f.mono, width)...)
		u.outDone = nl + 1
	}
	u.outLines = wrapPara(append([]string(nil), u.outDoneL...), printable(t[u.outDone:]), u.f.mono, width)
	return u.outLines
}

// drawOutput draws the streamed text with a scroll bar.
func (u *ui) drawOutput(dst *ebiten.Image) {
	c := u.f.panel(dst, desk.OutputRect, "Output")
	st := u.st
	status := ""
	switch {
	case st.Running:
		status = fmt.Sprintf("%s streaming %d tokens", []string{"◐", "◓", "◑", "◒"}[(u.frame/8)%4], st.Generated)
	case st.Err != nil:
		status = "error"
	case st.Stopped:
		status = fmt.Sprintf("stopped after %d tokens", st.Generated)
	case st.Runs > 0:
		status = fmt.Sprintf("%d tokens", st.Generated)
	}
	drawTextRight(dst, status, u.f.small, float64(desk.OutputRect.Max.X-12), float64(desk.OutputRect.Min.Y+11), colMuted)
	box := image.Rect(c.Min.X, c.Min.Y, c.Max.X, c.Max.Y)
	fillRect(dst, box, colField)
	inner := box.Inset(10)
	lh := lineHeight(u.f.mono)
	lines := u.outputText(float64(inner.Dx() - 10))
	visible := max(1, int(float64(inner.Dy())/lh))
	maxScroll := max(0, len(lines)-visible)
	if u.follow || u.scroll > maxScroll {
		u.scroll = maxScroll
	}
	u.scroll = max(0, u.scroll)
	if u.scroll == maxScroll {
		u.follow = true
	}
	if st.Runs == 0 {
		drawText(dst, "The model's answer streams here.", u.f.mono, float64(inner.Min.X), float64(inner.Min.Y), colDim)
	}
	for i := 0; i < visible && u.scroll+i < len(lines); i++ {
		drawText(dst, lines[u.scroll+i], u.f.mono, float64(inner.Min.X), float64(inner.Min.Y)+float64(i)*lh, colText)
	}
	if st.Err != nil {
		y := float64(inner.Min.Y) + float64(min(visible-2, len(lines)))*lh
		for i, l := range wrap("error: "+st.Err.Error(), u.f.ui, float64(inner.Dx()-10)) {
			drawText(dst, l, u.f.ui, float64(inner.Min.X), y+float64(i)*lineHeight(u.f.ui), colRed)
		}
	}
	if len(lines) > visible {
		track := image.Rect(box.Max.X-6, inner.Min.Y, box.Max.X-2, inner.Max.Y)
		fillRect(dst, track, colPanel)
		h := max(20, track.Dy()*visible/len(lines))
		y := track.Min.Y + (track.Dy()-h)*u.scroll/max(1, maxScroll)
		roundRect(dst, image.Rect(track.Min.X, y, track.Max.X, y+h), 2, colDim, nil)
	}
}

// drawHeatmap draws expert routing: one row per MoE layer, one column per
// expert, coloured by the share of the last N tokens that chose the expert,
// with the Quantile Balancing target k/E and its band in the legend.
func (u *ui) drawHeatmap(dst *ebiten.Image, v *engine.LiveSnapshot) {
	u.f.panel(dst, desk.HeatRect, "Expert routing")
	sub := fmt.Sprintf("layers × experts · last %d of N=%d tokens", v.Tokens, v.Window)
	drawTextRight(dst, sub, u.f.small, float64(desk.HeatRect.Max.X-12), float64(desk.HeatRect.Min.Y+11), colMuted)
	if !v.HasMoE {
		drawTextCenter(dst, "this model has no MoE layers", u.f.ui, desk.HeatRect, colMuted)
		return
	}
	g := desk.LayoutHeat(len(v.Rows), v.E)
	gr := g.Rect()
	// Column headers: expert ids (every n-th when they do not fit).
	every := max(1, int(math.Ceil(24/float64(g.CW))))
	for col := 0; col < g.Cols; col += every {
		e := col * v.E / g.Cols
		r := image.Rect(gr.Min.X+col*g.CW, gr.Min.Y-18, gr.Min.X+(col+1)*g.CW, gr.Min.Y-2)
		drawTextCenter(dst, fmt.Sprint(e), u.f.small, r, colMuted)
	}
	drawText(dst, "expert", u.f.small, float64(desk.HeatRect.Min.X+12), float64(gr.Min.Y-18), colDim)
	drawText(dst, "MaxVio", u.f.small, float64(gr.Max.X+10), float64(gr.Min.Y-18), colDim)
	labelEvery := max(1, int(math.Ceil(14/float64(g.CH))))
	for row := 0; row < g.Rows; row++ {
		r0, r1 := row*len(v.Rows)/g.Rows, max(row*len(v.Rows)/g.Rows+1, (row+1)*len(v.Rows)/g.Rows)
		y := gr.Min.Y + row*g.CH
		vio := 0.0
		for col := 0; col < g.Cols; col++ {
			e0, e1 := col*v.E/g.Cols, max(col*v.E/g.Cols+1, (col+1)*v.E/g.Cols)
			load, n := 0.0, 0
			for r := r0; r < r1; r++ {
				for e := e0; e < e1; e++ {
					load += v.Load[r*v.E+e]
					n++
				}
			}
			load /= float64(n)
			cell := image.Rect(gr.Min.X+col*g.CW, y, gr.Min.X+(col+1)*g.CW, y+g.CH)
			if g.CW >= 6 && g.CH >= 6 {
				cell = cell.Inset(1)
			}
			if !v.HasData {
				fillRect(dst, cell, color.RGBA{0x22, 0x27, 0x31, 0xff})
				continue
			}
			fillRect(dst, cell, heatColor(load, v.Target))
			if v.Tokens > 0 && (load > v.BandHi || load < v.BandLo) && g.CW >= 10 && g.CH >= 10 {
				strokeRect(dst, cell, 2, color.RGBA{0xff, 0xff, 0xff, 0xc0})
			}
			if g.CW >= 30 && g.CH >= 18 {
				tc := colText
				if load > v.Target*0.8 {
					tc = colBG
				}
				drawTextCenter(dst, fmt.Sprintf("%.0f", 100*load), u.f.small, cell, tc)
			}
		}
		for r := r0; r < r1; r++ {
			vio = max(vio, v.MaxVio[r])
		}
		if row%labelEvery == 0 {
			l := v.Rows[r0]
			kind := ""
			if l < len(v.Kinds) {
				kind = " " + v.Kinds[l].String()
			}
			ly := float64(y) + (float64(g.CH)-lineHeight(u.f.small))/2
			drawTextRight(dst, fmt.Sprintf("L%d%s", l+1, kind), u.f.small, float64(gr.Min.X-8), ly, colMuted)
			if v.HasData {
				col := colMuted
				if vio > 1 {
					col = colAmber
				}
				drawText(dst, fmt.Sprintf("%.2f", vio), u.f.small, float64(gr.Max.X+10), ly, col)
			}
		}
	}
	u.drawHeatLegend(dst, v)
}

// drawHeatLegend draws the colour bar with the QB target and its band.
func (u *ui) drawHeatLegend(dst *ebiten.Image, v *engine.LiveSnapshot) {
	bar := image.Rect(desk.HeatRect.Min.X+64, desk.HeatRect.Max.Y-72, desk.HeatRect.Max.X-62, desk.HeatRect.Max.Y-60)
	for x := bar.Min.X; x < bar.Max.X; x++ {
		load := 2 * v.Target * float64(x-bar.Min.X) / float64(bar.Dx()-1)
		fillRect(dst, image.Rect(x, bar.Min.Y, x+1, bar.Max.Y), heatColor(load, v.Target))
	}
	xOf := func(load float64) int {
		return bar.Min.X + int(math.Round(min(1, load/(2*v.Target))*float64(bar.Dx()-1)))
	}
	drawText(dst, "0%", u.f.small, float64(bar.Min.X), float64(bar.Max.Y+2), colMuted)
	drawTextRight(dst, fmt.Sprintf("≥%.0f%%", 200*v.Target), u.f.small, float64(bar.Max.X), float64(bar.Max.Y+2), colMuted)
	drawText(dst, "load", u.f.small, float64(desk.HeatRect.Min.X+12), float64(bar.Min.Y-2), colDim)
	if v.HasData {
		band := image.Rect(xOf(v.BandLo), bar.Min.Y-4, xOf(v.BandHi)+1, bar.Max.Y+4)
		strokeRect(dst, band, 2, colText)
	}
	tx := xOf(v.Target)
	fillRect(dst, image.Rect(tx-1, bar.Min.Y-6, tx+1, bar.Max.Y+6), colText)
	label := fmt.Sprintf("tick: Quantile Balancing target k/E = %.1f%%", 100*v.Target)
	drawText(dst, label, u.f.small, float64(desk.HeatRect.Min.X+12), float64(bar.Max.Y+18), colMuted)
	if v.HasData {
		label = fmt.Sprintf("box: ±2σ band over %d tokens, %.0f–%.0f%% · outlined cells fall outside", v.Tokens, 100*v.BandLo, 100*v.BandHi)
		drawText(dst, label, u.f.small, float64(desk.HeatRect.Min.X+12), float64(bar.Max.Y+34), colMuted)
	}
}

// drawKDA draws each KDA layer's recurrent state norm ‖S‖ as a bar with a
// sparkline of its recent history.
func (u *ui) drawKDA(dst *ebiten.Image, v *engine.LiveSnapshot) {
	c := u.f.panel(dst, desk.KdaRect, "KDA state norms |S|")
	var layers []int
	top := 0.0
	for i, h := range v.Norms {
		if i < len(v.Kinds) && (v.Kinds[i] == config.KDA || v.Kinds[i] == config.GDN) {
			layers = append(layers, i)
			for _, x := range h {
				top = max(top, x)
			}
		}
	}
	drawTextRight(dst, "per layer, Frobenius norm · history →", u.f.small, float64(desk.KdaRect.Max.X-12), float64(desk.KdaRect.Min.Y+11), colMuted)
	if len(layers) == 0 {
		drawTextCenter(dst, "this model has no KDA layers", u.f.ui, c, colMuted)
		return
	}
	rh := min(34, c.Dy()/len(layers))
	barX0, barX1 := c.Min.X+52, c.Min.X+c.Dx()*55/100
	sparkX0, sparkX1 := barX1+70, c.Max.X
	for j, l := range layers {
		y := c.Min.Y + j*rh
		h := v.Norms[l]
		label := j%max(1, int(math.Ceil(15/float64(rh)))) == 0
		if label {
			drawText(dst, fmt.Sprintf("L%d", l+1), u.f.small, float64(c.Min.X), float64(y)+(float64(rh)-lineHeight(u.f.small))/2, colMuted)
		}
		pad := min(3, rh/4)
		track := image.Rect(barX0, y+pad, barX1, y+rh-pad)
		roundRect(dst, track, 3, colField, nil)
		if len(h) == 0 || top <= 0 {
			continue
		}
		cur := h[len(h)-1]
		w := int(float64(track.Dx()) * cur / top)
		if w > 0 {
			roundRect(dst, image.Rect(track.Min.X, track.Min.Y, track.Min.X+max(w, 6), track.Max.Y), 3, colAccent, nil)
		}
		if label {
			drawText(dst, fmt.Sprintf("%.3g", cur), u.f.small, float64(barX1+8), float64(y)+(float64(rh)-lineHeight(u.f.small))/2, colText)
		}
		// sparkline of the last steps
		n := len(h)
		if n < 2 {
			continue
		}
		var p vector.Path
		for i, x := range h {
			px := float32(sparkX0) + float32(sparkX1-sparkX0)*float32(i)/float32(max(n-1, 1))
			py := float32(y+rh-4) - float32(rh-8)*float32(x/top)
			if i == 0 {
				p.MoveTo(px, py)
			} else {
				p.LineTo(px, py)
			}
		}
		op := &vector.DrawPathOptions{AntiAlias: true}
		op.ColorScale.ScaleWithColor(colGreen)
		vector.StrokePath(dst, &p, &vector.StrokeOptions{Width: 1.5}, op)
	}
}

// drawCache draws the MLA cache size and the backend of every step.
func (u *ui) drawCache(dst *ebiten.Image, v *engine.LiveSnapshot) {
	c := u.f.panel(dst, desk.CacheRect, "MLA cache · backend per step")
	last := v.Last
	mla := 0
	for _, k := range v.Kinds {
		if k == config.MLA || k == config.GQA {
			mla++
		}
	}
	line := fmt.Sprintf("MLA cache  %d tokens × %d layer(s) · %s allocated", last.CacheTokens, mla, humanBytes(last.CacheBytes))
	drawText(dst, line, u.f.ui, float64(c.Min.X), float64(c.Min.Y), colText)
	line = fmt.Sprintf("whole state %s (KDA part fixed in context)", humanBytes(last.StateBytes))
	if xc := v.ExpertCache; xc != nil { // experts streamed from storage
		line += fmt.Sprintf(" · expert cache %.0f%% hits, %s/token", 100*xc.HitRate, humanBytes(int64(xc.BytesPerToken)))
	}
	drawText(dst, line, u.f.small, float64(c.Min.X), float64(c.Min.Y+20), colMuted)
	chart := image.Rect(c.Min.X, c.Min.Y+44, c.Max.X, c.Max.Y-18)
	fillRect(dst, chart, colField)
	steps := v.Steps
	if len(steps) == 0 {
		drawTextCenter(dst, "no steps yet", u.f.small, chart, colDim)
		return
	}
	top := 0.0
	for _, s := range steps {
		top = max(top, math.Sqrt(s.Dur.Seconds()))
	}
	bw := float64(chart.Dx()-4) / float64(max(len(steps), 40))
	for i, s := range steps {
		col := stepColor(s)
		h := 3.0
		if top > 0 {
			h = max(3, float64(chart.Dy()-6)*math.Sqrt(s.Dur.Seconds())/top)
		}
		x := float64(chart.Min.X+2) + float64(i)*bw
		vector.FillRect(dst, float32(x), float32(float64(chart.Max.Y-3)-h), float32(max(1, bw-1)), float32(h), col, false)
	}
	x := float64(c.Min.X)
	item := func(col color.Color, label string) {
		vector.FillRect(dst, float32(x), float32(c.Max.Y-10), 8, 8, col, false)
		drawText(dst, label, u.f.small, x+12, float64(c.Max.Y-14), colMuted)
		x += 12 + text.Advance(label, u.f.small) + 14
	}
	s, pre := steps[len(steps)-1], steps[0]
	if pre.Tokens > 1 {
		item(stepColor(pre), fmt.Sprintf("prefill %d tok %.1f ms", pre.Tokens, float64(pre.Dur.Microseconds())/1000))
	}
	item(stepColor(s), fmt.Sprintf("%s decode %.2f ms", s.Backend, float64(s.Dur.Microseconds())/1000))
	drawTextRight(dst, "height ~ √time", u.f.small, float64(c.Max.X), float64(c.Max.Y-14), colDim)
}

// stepColor is a step's bar colour: amber for the CPU, green for other
// backends; prefill steps are lighter.
func stepColor(s engine.StepInfo) color.RGBA {
	switch {
	case s.Backend == "CPU" && s.Tokens > 1:
		return color.RGBA{0xf8, 0xd9, 0x8f, 0xff}
	case s.Backend == "CPU":
		return colAmber
	case s.Tokens > 1:
		return color.RGBA{0x9d, 0xe8, 0xbd, 0xff}
	}
	return colGreen
}
