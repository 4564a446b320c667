//go:build !js && !wasip1

package imageio

import (
	"bytes"
	"fmt"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// jpegBenchSize is the photo size of TestJPEGAgainstLibjpegTurbo and
// BenchmarkDecodeJPEG: TESSERA_JPEG_SIZE=WxH (BENCHMARKS.md uses
// 4000x3000, 12 megapixels), else 640x480.
func jpegBenchSize(t testing.TB) (int, int) {
	s := os.Getenv("TESSERA_JPEG_SIZE")
	if s == "" {
		return 640, 480
	}
	var w, h int
	if _, err := fmt.Sscanf(s, "%dx%d", &w, &h); err != nil || w <= 0 || h <= 0 {
		t.Fatalf("TESSERA_JPEG_SIZE=%q: want WxH, e.g. 4000x3000", s)
	}
	return w, h
}

// readPPM parses a binary PPM (P6, maxval 255) as djpeg writes it.
func readPPM(t *testing.T, b []byte) *RGB {
	t.Helper()
	var magic string
	var w, h, maxv int
	r := bytes.NewReader(b)
	if _, err := fmt.Fscan(r, &magic, &w, &h, &maxv); err != nil || magic != "P6" || maxv != 255 {
		t.Fatalf("not a P6 PPM with maxval 255: %v", err)
	}
	r.ReadByte() // the single whitespace byte before the pixels
	pix := b[len(b)-r.Len():]
	if len(pix) != w*h*3 {
		t.Fatalf("PPM %dx%d has %d pixel bytes", w, h, len(pix))
	}
	return &RGB{W: w, H: h, Pix: pix}
}

// TestJPEGAgainstLibjpegTurbo compares tessera's JPEG decoding (jpegli)
// and image/jpeg with libjpeg-turbo's djpeg (Debian libjpeg-turbo-progs)
// on a synthetic photo, and logs the time each takes. Skipped when djpeg
// is not installed (scripts/setup.sh jpeg); under CI=true that fails.
func TestJPEGAgainstLibjpegTurbo(t *testing.T) {
	djpeg, err := exec.LookPath("djpeg")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but djpeg is missing: install it with scripts/setup.sh jpeg")
		}
		t.Skip("no djpeg on PATH (scripts/setup.sh jpeg, or apt-get install libjpeg-turbo-progs)")
	}
	w, h := jpegBenchSize(t)
	data := photoJPEG(t, w, h, 90)
	path := filepath.Join(t.TempDir(), "photo.jpg")
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	ppm, err := exec.Command(djpeg, "-ppm", path).Output()
	if err != nil {
		t.Fatalf("djpeg: %v", err)
	}
	tTurbo := time.Since(t0)
	ref := readPPM(t, ppm)
	// -nosmooth: chroma replicated, not interpolated, as both Go decoders
	// return it (image.YCbCr planes at their stored resolution).
	ppm, err = exec.Command(djpeg, "-nosmooth", "-ppm", path).Output()
	if err != nil {
		t.Fatalf("djpeg -nosmooth: %v", err)
	}
	refBox := readPPM(t, ppm)

	t0 = time.Now()
	got, in, err := Decode(data, Limits{})
	tLi := time.Since(t0)
	if err != nil || in.Decoder != DecoderJPEGLI {
		t.Fatalf("Decode: %+v, %v", in, err)
	}
	t0 = time.Now()
	if _, _, err = Decode(data, Limits{}); err != nil {
		t.Fatal(err)
	}
	tLi2 := time.Since(t0)
	t0 = time.Now()
	std, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	stdRGB := toRGB(std)
	tStd := time.Since(t0)

	liMax, liMean := diff(got, refBox)
	stdMax, stdMean := diff(stdRGB, refBox)
	liMaxF, liMeanF := diff(got, ref)
	stdMaxF, stdMeanF := diff(stdRGB, ref)
	mp := strconv.FormatFloat(float64(w*h)/1e6, 'f', 1, 64)
	t.Logf("%dx%d (%s MP) q90 4:2:0, %d bytes", w, h, mp, len(data))
	t.Logf("djpeg (libjpeg-turbo, incl. process and PPM): %v", tTurbo.Round(time.Millisecond))
	t.Logf("jpegli (Decode, to RGB): first %v (compiles the module), then %v; vs djpeg -nosmooth max |Δ| %d, mean %.3f; vs djpeg max |Δ| %d, mean %.3f",
		tLi.Round(time.Millisecond), tLi2.Round(time.Millisecond), liMax, liMean, liMaxF, liMeanF)
	t.Logf("image/jpeg (to RGB): %v; vs djpeg -nosmooth max |Δ| %d, mean %.3f; vs djpeg max |Δ| %d, mean %.3f",
		tStd.Round(time.Millisecond), stdMax, stdMean, stdMaxF, stdMeanF)
	if liMax > 8 || liMean > 1 || stdMax > 8 || stdMean > 1 {
		t.Errorf("a decoder strays from libjpeg-turbo (djpeg -nosmooth): jpegli max %d mean %.3f, image/jpeg max %d mean %.3f (want ≤ 8, ≤ 1)",
			liMax, liMean, stdMax, stdMean)
	}
}

// BenchmarkDecodeJPEG decodes the synthetic photo (TESSERA_JPEG_SIZE)
// with Decode (jpegli) and with image/jpeg, both to RGB.
func BenchmarkDecodeJPEG(b *testing.B) {
	w, h := jpegBenchSize(b)
	data := photoJPEG(b, w, h, 90)
	b.Run("jpegli", func(b *testing.B) {
		b.SetBytes(int64(w * h))
		for b.Loop() {
			if _, _, err := Decode(data, Limits{}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("image-jpeg", func(b *testing.B) {
		b.SetBytes(int64(w * h))
		for b.Loop() {
			img, err := jpeg.Decode(bytes.NewReader(data))
			if err != nil {
				b.Fatal(err)
			}
			toRGB(img)
		}
	})
}
