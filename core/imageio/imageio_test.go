package imageio

import (
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"hash/crc32"
	"image"
	"image/color"
	"image/gif"
	"image/jpeg"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"testing"
)

var update = flag.Bool("update", false, "regenerate testdata/images")

const imgDir = "../../testdata/images"

// withOrientation inserts an APP1 Exif segment with orientation o after the
// SOI marker of a JPEG (big-endian TIFF, one IFD0 entry).
func withOrientation(jpg []byte, o uint16) []byte {
	var t bytes.Buffer
	t.WriteString("MM")
	binary.Write(&t, binary.BigEndian, uint16(42))
	binary.Write(&t, binary.BigEndian, uint32(8))
	binary.Write(&t, binary.BigEndian, uint16(1))
	binary.Write(&t, binary.BigEndian, [4]uint16{0x0112, 3, 0, 1})
	binary.Write(&t, binary.BigEndian, [2]uint16{o, 0})
	binary.Write(&t, binary.BigEndian, uint32(0))
	seg := append([]byte("Exif\x00\x00"), t.Bytes()...)
	var out bytes.Buffer
	out.Write(jpg[:2])
	out.Write([]byte{0xFF, 0xE1})
	binary.Write(&out, binary.BigEndian, uint16(len(seg)+2))
	out.Write(seg)
	out.Write(jpg[2:])
	return out.Bytes()
}

// quadrants is a w×h image whose quadrants are red (top-left), green
// (top-right), blue (bottom-left) and white (bottom-right).
func quadrants(w, h int) *image.RGBA {
	m := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := range h {
		for x := range w {
			c := color.RGBA{255, 0, 0, 255}
			switch {
			case x >= w/2 && y < h/2:
				c = color.RGBA{0, 255, 0, 255}
			case x < w/2 && y >= h/2:
				c = color.RGBA{0, 0, 255, 255}
			case x >= w/2 && y >= h/2:
				c = color.RGBA{255, 255, 255, 255}
			}
			m.Set(x, y, c)
		}
	}
	return m
}

// TestGenerate writes the committed test images (go test -run Generate -update).
func TestGenerate(t *testing.T) {
	if !*update {
		t.Skip("run with -update to regenerate testdata/images")
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, quadrants(64, 40), &jpeg.Options{Quality: 95}); err != nil {
		t.Fatal(err)
	}
	write(t, "quadrants-exif6.jpg", withOrientation(b.Bytes(), 6))
	b.Reset()
	jpeg.Encode(&b, quadrants(64, 40), &jpeg.Options{Quality: 95})
	write(t, "quadrants.jpg", b.Bytes())

	a := image.NewNRGBA(image.Rect(0, 0, 40, 30))
	for y := range 30 {
		for x := range 40 {
			a.SetNRGBA(x, y, color.NRGBA{uint8(x * 6), uint8(y * 8), 128, uint8(x * 255 / 39)})
		}
	}
	b.Reset()
	png.Encode(&b, a)
	write(t, "alpha.png", b.Bytes())

	g := image.NewGray(image.Rect(0, 0, 30, 50))
	for y := range 50 {
		for x := range 30 {
			g.SetGray(x, y, color.Gray{uint8((x*7 + y*3) % 256)})
		}
	}
	b.Reset()
	png.Encode(&b, g)
	write(t, "gray.png", b.Bytes())

	p := image.NewPaletted(image.Rect(0, 0, 32, 32), color.Palette{color.Black, color.White})
	for y := range 32 {
		for x := range 32 {
			p.SetColorIndex(x, y, uint8((x/4+y/4)%2))
		}
	}
	b.Reset()
	gif.Encode(&b, p, nil)
	write(t, "checker.gif", b.Bytes())
}

func write(t *testing.T, name string, b []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(imgDir, name), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(imgDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestSmartResize(t *testing.T) {
	for _, c := range []struct {
		h, w, f, minP, maxP int
		wh, ww              int
		bad                 bool
	}{
		{h: 56, w: 56, f: 28, minP: 3136, maxP: 1003520, wh: 56, ww: 56},
		{h: 100, w: 200, f: 28, minP: 3136, maxP: 1003520, wh: 112, ww: 196},
		{h: 10, w: 10, f: 28, minP: 3136, maxP: 1003520, wh: 56, ww: 56},
		{h: 2000, w: 3000, f: 28, minP: 3136, maxP: 1003520, wh: 812, ww: 1204},
		{h: 42, w: 42, f: 28, minP: 0, maxP: 1 << 20, wh: 56, ww: 56}, // round(1.5) = 2 (half to even)
		{h: 70, w: 70, f: 28, minP: 0, maxP: 1 << 20, wh: 56, ww: 56}, // round(2.5) = 2
		{h: 1, w: 300, f: 28, minP: 0, maxP: 1 << 20, bad: true},      // aspect > 200
		{h: 0, w: 5, f: 28, minP: 0, maxP: 1 << 20, bad: true},
		{h: 50, w: 50, f: 28, minP: 0, maxP: 100, bad: true},
	} {
		h, w, err := SmartResize(c.h, c.w, c.f, c.minP, c.maxP)
		if c.bad {
			if err == nil {
				t.Errorf("%dx%d: want error, got %dx%d", c.w, c.h, w, h)
			}
			continue
		}
		if err != nil || h != c.wh || w != c.ww {
			t.Errorf("%dx%d: got %dx%d %v, want %dx%d", c.w, c.h, w, h, err, c.ww, c.wh)
		}
		if err == nil && (h*w > c.maxP || h%c.f != 0 || w%c.f != 0) {
			t.Errorf("%dx%d: %dx%d breaks the bounds", c.w, c.h, w, h)
		}
	}
}

func TestResizeIdentityAndWeights(t *testing.T) {
	img := &RGB{W: 5, H: 3, Pix: make([]uint8, 45)}
	for i := range img.Pix {
		img.Pix[i] = uint8(i * 5)
	}
	for _, r := range []Resample{Bicubic, Bilinear} {
		out, err := Resize(img, 5, 3, r)
		if err != nil {
			t.Fatal(err)
		}
		for y := range 3 {
			for x := range 5 {
				for c := range 3 {
					if got, want := out[(c*3+y)*5+x], float32(img.Pix[(y*5+x)*3+c]); math.Abs(float64(got-want)) > 1e-4 {
						t.Fatalf("%v identity (%d,%d,%d): %v want %v", r, x, y, c, got, want)
					}
				}
			}
		}
		for _, n := range [][2]int{{10, 3}, {3, 10}, {7, 7}} {
			_, ws := weights(n[0], n[1], r)
			for i, w := range ws {
				var s float32
				for _, v := range w {
					s += v
				}
				if math.Abs(float64(s-1)) > 1e-5 {
					t.Errorf("%v %d→%d output %d: weights sum to %v", r, n[0], n[1], i, s)
				}
			}
		}
	}
	// Bilinear 2→1 averages; a constant image stays constant under bicubic.
	two := &RGB{W: 2, H: 1, Pix: []uint8{0, 0, 0, 100, 200, 50}}
	out, _ := Resize(two, 1, 1, Bilinear)
	if out[0] != 50 || out[1] != 100 || out[2] != 25 {
		t.Errorf("bilinear 2→1: got %v, want [50 100 25]", out)
	}
}

func TestPatchOrder(t *testing.T) {
	// 56×56 image, patch 14, merge 2: grid 4×4; pixel red = patch row·4 + col.
	img := &RGB{W: 56, H: 56, Pix: make([]uint8, 56*56*3)}
	for y := range 56 {
		for x := range 56 {
			img.Pix[(y*56+x)*3] = uint8((y/14)*4 + x/14)
			img.Pix[(y*56+x)*3+1] = uint8(y % 14)
			img.Pix[(y*56+x)*3+2] = uint8(x % 14)
		}
	}
	o := Options{PatchSize: 14, MergeH: 2, MergeW: 2, MinPixels: 0, MaxPixels: 1 << 20,
		Mean: [3]float32{0, 0, 0}, Std: [3]float32{1.0 / 255, 1.0 / 255, 1.0 / 255}}
	p, err := Preprocess(img, o)
	if err != nil {
		t.Fatal(err)
	}
	if p.GridH != 4 || p.GridW != 4 || p.Merged() != 4 || p.Dim != 588 {
		t.Fatalf("grid %dx%d merged %d dim %d", p.GridH, p.GridW, p.Merged(), p.Dim)
	}
	// Merge-window order: windows row-major, patches row-major inside.
	want := []int{0, 1, 4, 5, 2, 3, 6, 7, 8, 9, 12, 13, 10, 11, 14, 15}
	for i, w := range want {
		row, col := p.Pos(i)
		if row*4+col != w {
			t.Errorf("Pos(%d) = (%d,%d), want patch %d", i, row, col, w)
		}
		patch := p.Data[i*588:]
		if got := patch[0]; math.Abs(float64(got)-float64(w)) > 1e-3 {
			t.Errorf("patch %d: red = %v, want %d", i, got, w)
		}
		// element (c=1, py=3, px=5) is green = py = 3; (c=2, py=3, px=5) is blue = px = 5
		if g, b := patch[196+3*14+5], patch[2*196+3*14+5]; math.Abs(float64(g)-3) > 1e-3 || math.Abs(float64(b)-5) > 1e-3 {
			t.Errorf("patch %d: layout (c,py,px) wrong: green %v blue %v", i, g, b)
		}
	}
}

func TestLimits(t *testing.T) {
	var b bytes.Buffer
	png.Encode(&b, image.NewGray(image.Rect(0, 0, 300, 200)))
	for _, c := range []struct {
		name string
		lim  Limits
		ok   bool
	}{
		{"default", Limits{}, true},
		{"pixels", Limits{MaxPixels: 59999}, false},
		{"side", Limits{MaxSide: 299}, false},
		{"bytes", Limits{MaxBytes: 10}, false},
		{"exact", Limits{MaxPixels: 60000, MaxSide: 300}, true},
	} {
		_, _, err := Decode(b.Bytes(), c.lim)
		if c.ok != (err == nil) || (!c.ok && !errors.Is(err, ErrTooLarge)) {
			t.Errorf("%s: err = %v", c.name, err)
		}
	}
	// A header claiming 100000×100000 with no pixel data must be refused
	// on the header (ErrTooLarge), not fail (or allocate) while decoding.
	hdr := b.Bytes()[:33] // signature + IHDR chunk
	huge := append([]byte(nil), hdr...)
	binary.BigEndian.PutUint32(huge[16:], 100000)
	binary.BigEndian.PutUint32(huge[20:], 100000)
	binary.BigEndian.PutUint32(huge[29:], crc32.ChecksumIEEE(huge[12:29]))
	if _, _, err := Decode(huge, Limits{}); !errors.Is(err, ErrTooLarge) {
		t.Errorf("huge header: err = %v, want ErrTooLarge", err)
	}
	if _, _, err := Decode([]byte("BM not an image"), Limits{}); err == nil {
		t.Error("garbage: want error")
	}
	if _, err := FromRGBA(2, 2, make([]uint8, 15), Limits{}); err == nil {
		t.Error("FromRGBA short buffer: want error")
	}
}

func TestEXIFOrientation(t *testing.T) {
	data := read(t, "quadrants-exif6.jpg")
	if o := JPEGOrientation(data); o != 6 {
		t.Fatalf("orientation = %d, want 6", o)
	}
	img, info, err := Decode(data, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	if info.W != 64 || info.H != 40 || img.W != 40 || img.H != 64 {
		t.Fatalf("stored %dx%d, displayed %dx%d; want 64x40 → 40x64", info.W, info.H, img.W, img.H)
	}
	// Rotated 90° clockwise: top-left shows blue, top-right red,
	// bottom-left white, bottom-right green.
	near := func(x, y int, r, g, b uint8) {
		p := img.Pix[(y*img.W+x)*3:]
		if absd(p[0], r) > 40 || absd(p[1], g) > 40 || absd(p[2], b) > 40 {
			t.Errorf("pixel (%d,%d) = %v, want ≈ %v", x, y, p[:3], []uint8{r, g, b})
		}
	}
	near(5, 5, 0, 0, 255)
	near(34, 5, 255, 0, 0)
	near(5, 58, 255, 255, 255)
	near(34, 58, 0, 255, 0)
	// Every orientation maps the stored image consistently.
	src := &RGB{W: 3, H: 2, Pix: []uint8{0, 0, 0, 1, 1, 1, 2, 2, 2, 3, 3, 3, 4, 4, 4, 5, 5, 5}}
	for o, want := range map[int][]uint8{
		1: {0, 1, 2, 3, 4, 5}, 2: {2, 1, 0, 5, 4, 3}, 3: {5, 4, 3, 2, 1, 0}, 4: {3, 4, 5, 0, 1, 2},
		5: {0, 3, 1, 4, 2, 5}, 6: {3, 0, 4, 1, 5, 2}, 7: {5, 2, 4, 1, 3, 0}, 8: {2, 5, 1, 4, 0, 3},
	} {
		got := Orient(src, o)
		for i, w := range want {
			if got.Pix[i*3] != w {
				t.Errorf("orientation %d: got %v, want %v", o, got.Pix, want)
				break
			}
		}
	}
	if JPEGOrientation([]byte{0xFF, 0xD8, 0xFF, 0xE1, 0xFF, 0xFF}) != 1 {
		t.Error("truncated APP1: want orientation 1")
	}
}

func absd(a, b uint8) int {
	if a > b {
		return int(a - b)
	}
	return int(b - a)
}

// Preprocessing goldens: resized size and the first normalised values.
func TestPreprocessGoldens(t *testing.T) {
	o := Options{PatchSize: 14, MergeH: 2, MergeW: 2, MinPixels: 56 * 56, MaxPixels: 28 * 28 * 1280,
		Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}, Resample: Bicubic}
	for _, c := range []struct {
		file   string
		gh, gw int
		first  []float32
	}{
		{"quadrants-exif6.jpg", 6, 4, []float32{-1, -1, -1, -1}},
		{"alpha.png", 4, 6, []float32{1, 0.993461, 0.9700538, 0.9450979}},
		{"gray.png", 6, 4, []float32{-1, -0.990032, -0.9567956, -0.926301}},
		{"checker.gif", 4, 4, []float32{-1, -1, -1, -1}},
		{"blue-purple-pink.lossy.webp", 8, 10, []float32{-0.77254903, -0.77254903, -0.7706882, -0.7880859}},
	} {
		img, _, err := Decode(read(t, c.file), Limits{})
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		p, err := Preprocess(img, o)
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		t.Logf("%s: %dx%d → grid %dx%d first %v", c.file, img.W, img.H, p.GridH, p.GridW, p.Data[:4])
		if p.GridH != c.gh || p.GridW != c.gw {
			t.Errorf("%s: grid %dx%d, want %dx%d", c.file, p.GridH, p.GridW, c.gh, c.gw)
		}
		for i, w := range c.first {
			if math.Abs(float64(p.Data[i]-w)) > 1e-4 {
				t.Errorf("%s: value %d = %v, want %v", c.file, i, p.Data[i], w)
			}
		}
		for i, v := range p.Data {
			if v < -1.0001 || v > 1.0001 || v != v {
				t.Fatalf("%s: value %d = %v outside [-1, 1]", c.file, i, v)
			}
		}
	}
}
