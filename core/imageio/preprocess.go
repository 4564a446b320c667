package imageio

import (
	"fmt"
	"math"
)

// Resample selects the resampling filter.
type Resample uint8

const (
	// Bicubic is the Keys cubic with a = −0.5 (PIL BICUBIC, Catmull-Rom):
	// K(x) = 1.5|x|³ − 2.5|x|² + 1 for |x| < 1,
	// −0.5|x|³ + 2.5|x|² − 4|x| + 2 for 1 ≤ |x| < 2, else 0.
	Bicubic Resample = iota
	// Bilinear is the triangle filter K(x) = max(0, 1 − |x|).
	Bilinear
)

// ParseResample reads "bicubic" or "bilinear".
func ParseResample(s string) (Resample, error) {
	switch s {
	case "bicubic", "":
		return Bicubic, nil
	case "bilinear":
		return Bilinear, nil
	}
	return 0, fmt.Errorf("resample %q is not supported (want bicubic or bilinear)", s)
}

func (r Resample) String() string {
	if r == Bilinear {
		return "bilinear"
	}
	return "bicubic"
}

func (r Resample) support() float64 {
	if r == Bilinear {
		return 1
	}
	return 2
}

func (r Resample) kernel(x float64) float64 {
	x = math.Abs(x)
	if r == Bilinear {
		return math.Max(0, 1-x)
	}
	const a = -0.5
	switch {
	case x < 1:
		return ((a+2)*x-(a+3))*x*x + 1
	case x < 2:
		return ((a*x-5*a)*x+8*a)*x - 4*a
	}
	return 0
}

// SmartResize returns the (height, width) an h×w image is resized to
// (Qwen2-VL smart_resize, architecture.md §6.1), with F = factor:
//
//	h̄ = max(F, round(h/F)·F), w̄ = max(F, round(w/F)·F)
//	if h̄·w̄ > maxPixels: β = sqrt(h·w/maxPixels), h̄ = max(F, ⌊h/β/F⌋·F), w̄ = max(F, ⌊w/β/F⌋·F)
//	if h̄·w̄ < minPixels: β = sqrt(minPixels/(h·w)), h̄ = ⌈h·β/F⌉·F, w̄ = ⌈w·β/F⌉·F
//
// (round is half to even, as Python's round). Both results are multiples
// of F. It fails for non-positive sizes, an aspect ratio over 200, or
// bounds that cannot hold one F×F tile.
func SmartResize(h, w, factor, minPixels, maxPixels int) (int, int, error) {
	if h <= 0 || w <= 0 {
		return 0, 0, fmt.Errorf("smart resize: invalid image size %dx%d", w, h)
	}
	if factor <= 0 {
		return 0, 0, fmt.Errorf("smart resize: factor %d must be positive", factor)
	}
	if maxPixels < factor*factor || minPixels > maxPixels {
		return 0, 0, fmt.Errorf("smart resize: pixel bounds [%d, %d] cannot hold a %dx%d tile", minPixels, maxPixels, factor, factor)
	}
	if max(h, w) > 200*min(h, w) {
		return 0, 0, fmt.Errorf("smart resize: aspect ratio of %dx%d exceeds 200", w, h)
	}
	F := float64(factor)
	hb := max(factor, int(math.RoundToEven(float64(h)/F))*factor)
	wb := max(factor, int(math.RoundToEven(float64(w)/F))*factor)
	if hb*wb > maxPixels {
		beta := math.Sqrt(float64(h) * float64(w) / float64(maxPixels))
		hb = max(factor, int(math.Floor(float64(h)/beta/F))*factor)
		wb = max(factor, int(math.Floor(float64(w)/beta/F))*factor)
	} else if hb*wb < minPixels {
		beta := math.Sqrt(float64(minPixels) / (float64(h) * float64(w)))
		hb = int(math.Ceil(float64(h)*beta/F)) * factor
		wb = int(math.Ceil(float64(w)*beta/F)) * factor
	}
	return hb, wb, nil
}

// weights returns, for each of the nOut output samples, the first input
// index and the normalised filter weights (PIL-style antialiased
// resampling): scale s = nIn/nOut, f = max(s, 1), centre c = (i + ½)·s,
// taps j ∈ [⌊c − R·f + ½⌋, ⌊c + R·f + ½⌋) ∩ [0, nIn) with weight
// K((j + ½ − c)/f), divided by their sum (R = the filter's support).
func weights(nIn, nOut int, r Resample) ([]int, [][]float32) {
	s := float64(nIn) / float64(nOut)
	f := math.Max(s, 1)
	R := r.support() * f
	first := make([]int, nOut)
	ws := make([][]float32, nOut)
	for i := range nOut {
		c := (float64(i) + 0.5) * s
		lo := max(0, int(math.Floor(c-R+0.5)))
		hi := min(nIn, int(math.Floor(c+R+0.5)))
		w := make([]float64, 0, hi-lo)
		var sum float64
		for j := lo; j < hi; j++ {
			k := r.kernel((float64(j) + 0.5 - c) / f)
			w = append(w, k)
			sum += k
		}
		out := make([]float32, len(w))
		for j := range w {
			if sum != 0 {
				out[j] = float32(w[j] / sum)
			}
		}
		first[i], ws[i] = lo, out
	}
	return first, ws
}

// Resize resamples img to w×h with filter r, separably (horizontal pass,
// then vertical), and returns planar float32 values [3][h][w] in [0, 255]
// (clamped, not rounded).
func Resize(img *RGB, w, h int, r Resample) ([]float32, error) {
	if w <= 0 || h <= 0 || img.W <= 0 || img.H <= 0 || len(img.Pix) != img.W*img.H*3 {
		return nil, fmt.Errorf("resize: invalid sizes (%dx%d image with %d bytes to %dx%d)", img.W, img.H, len(img.Pix), w, h)
	}
	xf, xw := weights(img.W, w, r)
	yf, yw := weights(img.H, h, r)
	// Horizontal: tmp[c][y][x'] for every source row y.
	tmp := make([]float32, 3*img.H*w)
	for y := 0; y < img.H; y++ {
		row := img.Pix[y*img.W*3:]
		for x := 0; x < w; x++ {
			var a [3]float32
			for k, wt := range xw[x] {
				p := row[(xf[x]+k)*3:]
				a[0] += wt * float32(p[0])
				a[1] += wt * float32(p[1])
				a[2] += wt * float32(p[2])
			}
			for c := 0; c < 3; c++ {
				tmp[(c*img.H+y)*w+x] = a[c]
			}
		}
	}
	out := make([]float32, 3*h*w)
	for c := 0; c < 3; c++ {
		for y := 0; y < h; y++ {
			o := out[(c*h+y)*w : (c*h+y+1)*w]
			for k, wt := range yw[y] {
				src := tmp[(c*img.H+yf[y]+k)*w : (c*img.H+yf[y]+k+1)*w]
				for x := range o {
					o[x] += wt * src[x]
				}
			}
			for x, v := range o {
				o[x] = min(255, max(0, v))
			}
		}
	}
	return out, nil
}

// Options configures Preprocess.
type Options struct {
	PatchSize int // p, e.g. 14
	MergeH    int // merge kernel height (2)
	MergeW    int // merge kernel width (2)
	MinPixels int
	MaxPixels int
	Mean, Std [3]float32
	Resample  Resample
}

// Factor is the resize granularity: patch·merge per axis (the larger of
// the two merge sides, so that both axes divide).
func (o Options) Factor() int { return o.PatchSize * max(o.MergeH, o.MergeW) }

// validate checks the options.
func (o Options) validate() error {
	if o.PatchSize <= 0 || o.MergeH <= 0 || o.MergeW <= 0 {
		return fmt.Errorf("preprocess: patch size %d and merge kernel %dx%d must be positive", o.PatchSize, o.MergeH, o.MergeW)
	}
	for c, s := range o.Std {
		if s == 0 || s != s {
			return fmt.Errorf("preprocess: std[%d] = %v must be non-zero", c, s)
		}
	}
	return nil
}

// Grid returns the patch grid (rows, cols) an h×w image yields:
// SmartResize to multiples of Factor, divided by the patch size.
func (o Options) Grid(h, w int) (int, int, error) {
	if err := o.validate(); err != nil {
		return 0, 0, err
	}
	rh, rw, err := SmartResize(h, w, o.Factor(), o.MinPixels, o.MaxPixels)
	if err != nil {
		return 0, 0, err
	}
	return rh / o.PatchSize, rw / o.PatchSize, nil
}

// Patches is an image cut into patches: N = GridH·GridW rows of
// Dim = 3·p·p values, element (c, py, px) of a patch at c·p·p + py·p + px
// (the flattening of a Conv2d weight [D, 3, p, p]). Rows are in
// merge-window order: windows row-major over the (GridH/mh)×(GridW/mw)
// merged grid, and within a window the mh·mw patches row-major, so each
// merged token's patches are consecutive.
type Patches struct {
	GridH, GridW   int
	PatchSize      int
	MergeH, MergeW int
	Dim            int
	Data           []float32
}

// N is the number of patches.
func (p *Patches) N() int { return p.GridH * p.GridW }

// Merged is the number of merged tokens (placeholder tokens) of the image.
func (p *Patches) Merged() int { return (p.GridH / p.MergeH) * (p.GridW / p.MergeW) }

// Pos returns the (row, col) on the unmerged patch grid of patch row i:
// with window index b = i / (mh·mw) and r = i mod (mh·mw),
// row = (b / (GridW/mw))·mh + r / mw, col = (b mod (GridW/mw))·mw + r mod mw.
func (p *Patches) Pos(i int) (row, col int) {
	k := p.MergeH * p.MergeW
	b, r := i/k, i%k
	wc := p.GridW / p.MergeW
	return (b/wc)*p.MergeH + r/p.MergeW, (b%wc)*p.MergeW + r%p.MergeW
}

// Preprocess resizes img to its smart-resize size, normalises every value
// v ∈ [0, 255] as (v/255 − mean[c]) / std[c] and cuts it into patches in
// merge-window order.
func Preprocess(img *RGB, o Options) (*Patches, error) {
	gh, gw, err := o.Grid(img.H, img.W)
	if err != nil {
		return nil, err
	}
	ps := o.PatchSize
	h, w := gh*ps, gw*ps
	px, err := Resize(img, w, h, o.Resample)
	if err != nil {
		return nil, err
	}
	for c := 0; c < 3; c++ {
		m, s := o.Mean[c], o.Std[c]
		pl := px[c*h*w : (c+1)*h*w]
		for i, v := range pl {
			pl[i] = (v/255 - m) / s
		}
	}
	p := &Patches{GridH: gh, GridW: gw, PatchSize: ps, MergeH: o.MergeH, MergeW: o.MergeW, Dim: 3 * ps * ps}
	p.Data = make([]float32, p.N()*p.Dim)
	for i := range p.N() {
		row, col := p.Pos(i)
		dst := p.Data[i*p.Dim:]
		for c := 0; c < 3; c++ {
			for py := 0; py < ps; py++ {
				src := px[(c*h+row*ps+py)*w+col*ps:]
				copy(dst[(c*ps+py)*ps:(c*ps+py+1)*ps], src[:ps])
			}
		}
	}
	return p, nil
}
