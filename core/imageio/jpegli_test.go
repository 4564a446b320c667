//go:build !js && !wasip1

package imageio

import (
	"bytes"
	"image"
	"image/color"
	"image/jpeg"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/gen2brain/jpegli"
)

// photoJPEG encodes a w×h photo-like image (smooth gradients plus a
// deterministic texture, so that decoders' IDCT and upsampling differ) as
// a baseline 4:2:0 JPEG at quality q.
func photoJPEG(t testing.TB, w, h, q int) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	s := uint32(1)
	for y := 0; y < h; y++ {
		for x := 0; x < w; x++ {
			s = s*1664525 + 1013904223
			n := int(s>>28) - 8
			tri := (x + 2*y) % 512 // a diagonal triangle wave
			if tri > 255 {
				tri = 511 - tri
			}
			img.SetRGBA(x, y, color.RGBA{
				R: uint8(min(255, max(0, x*255/w+n))),
				G: uint8(min(255, max(0, y*255/h+n))),
				B: uint8(min(255, max(0, tri+n))),
				A: 255,
			})
		}
	}
	var b bytes.Buffer
	if err := jpeg.Encode(&b, img, &jpeg.Options{Quality: q}); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// sosParams returns the offset of the Ah/Al byte of the first scan header.
func sosParams(t *testing.T, jpg []byte) int {
	t.Helper()
	i := bytes.Index(jpg, []byte{0xff, 0xda})
	if i < 0 || i+5 >= len(jpg) {
		t.Fatal("no SOS marker")
	}
	return i + 5 + 2*int(jpg[i+4]) + 2
}

func diff(a, b *RGB) (maxd int, mean float64) {
	sum := 0
	for i := range a.Pix {
		d := absd(a.Pix[i], b.Pix[i])
		maxd = max(maxd, d)
		sum += d
	}
	return maxd, float64(sum) / float64(len(a.Pix))
}

// TestDecodeUsesJPEGLI: native Decode gives jpegli's pixels (oriented),
// not image/jpeg's, and says so in Info.Decoder.
func TestDecodeUsesJPEGLI(t *testing.T) {
	files := map[string][]byte{"photo.jpg": photoJPEG(t, 256, 192, 90)}
	for _, n := range []string{"quadrants.jpg", "quadrants-exif6.jpg"} {
		files[n] = read(t, n)
	}
	for name, data := range files {
		got, in, err := Decode(data, Limits{})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if in.Decoder != DecoderJPEGLI {
			t.Errorf("%s: decoded by %q, want %q", name, in.Decoder, DecoderJPEGLI)
		}
		li, err := jpegli.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: jpegli: %v", name, err)
		}
		want := Orient(toRGB(li), in.Orientation)
		if !bytes.Equal(got.Pix, want.Pix) || got.W != want.W {
			t.Errorf("%s: Decode's pixels are not jpegli's", name)
		}
		std, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		// The decoders are close, and on a photo distinguishable.
		maxd, mean := diff(got, Orient(toRGB(std), in.Orientation))
		t.Logf("%s: jpegli vs image/jpeg: max |Δ| %d, mean %.3f", name, maxd, mean)
		if maxd > 40 || mean > 3 {
			t.Errorf("%s: jpegli and image/jpeg differ by max %d, mean %.3f (want ≤ 40, ≤ 3)", name, maxd, mean)
		}
		if name == "photo.jpg" && maxd == 0 {
			t.Errorf("%s: jpegli and image/jpeg agree exactly: the test cannot tell them apart", name)
		}
	}
}

// TestDecodeFallsBackToStdJPEG: a baseline JPEG whose scan header carries
// successive-approximation bits (Ah = Al = 1, meaningful only in
// progressive scans) is refused by jpegli and decoded by image/jpeg, which
// ignores them; a file both refuse is an error naming both reasons.
func TestDecodeFallsBackToStdJPEG(t *testing.T) {
	data := photoJPEG(t, 64, 48, 90)
	data[sosParams(t, data)] = 0x11
	if _, err := jpegli.Decode(bytes.NewReader(data)); err == nil {
		t.Fatal("jpegli accepts the patched file: the fallback is not exercised")
	}
	got, in, err := Decode(data, Limits{})
	if err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if in.Decoder != DecoderStdJPEG {
		t.Errorf("decoded by %q, want %q", in.Decoder, DecoderStdJPEG)
	}
	std, err := jpeg.Decode(bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Pix, toRGB(std).Pix) {
		t.Error("fallback pixels are not image/jpeg's")
	}

	// Header intact, entropy-coded data cut short: neither decodes it.
	whole := photoJPEG(t, 64, 48, 90)
	cut := whole[:sosParams(t, whole)+40]
	_, _, err = Decode(cut, Limits{})
	if err == nil {
		t.Fatal("a truncated JPEG decoded")
	}
	for _, want := range []string{"decoding jpeg image", "jpegli:", "image/jpeg:"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
	}
}

// TestProbeJPEGLargeHeader: a JPEG whose metadata before the frame header
// exceeds 1 KiB (as camera EXIF blocks do) probes and decodes; jpegli's
// own DecodeConfig, which image.DecodeConfig may pick, reads only 1 KiB.
func TestProbeJPEGLargeHeader(t *testing.T) {
	jpg := photoJPEG(t, 64, 48, 90)
	com := append([]byte{0xff, 0xfe, 0x0f, 0xa2}, bytes.Repeat([]byte("x"), 4000)...)
	data := append(append(append([]byte{}, jpg[:2]...), com...), jpg[2:]...)
	in, err := Probe(data, Limits{})
	if err != nil || in.W != 64 || in.H != 48 {
		t.Fatalf("Probe: %+v, %v", in, err)
	}
	if _, in, err = Decode(data, Limits{}); err != nil || in.Decoder != DecoderJPEGLI {
		t.Fatalf("Decode: %+v, %v", in, err)
	}
}

// TestJPEGLIQuiet: jpegli prints libjpeg-style diagnostics from its
// WebAssembly module; decoding a file it refuses must leave stderr and
// stdout empty (tessera's errors are one line, from the returned error).
// It runs in a child process so that jpegli is set up there first.
func TestJPEGLIQuiet(t *testing.T) {
	if os.Getenv("TESSERA_JPEGLI_CHILD") == "1" {
		data := photoJPEG(t, 64, 48, 90)
		data[sosParams(t, data)] = 0x11
		if _, in, err := Decode(data, Limits{}); err != nil || in.Decoder != DecoderStdJPEG {
			t.Fatalf("Decode: %+v, %v", in, err)
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestJPEGLIQuiet$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESSERA_JPEGLI_CHILD=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("child: %v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
	}
	if stderr.Len() != 0 || strings.TrimSpace(stdout.String()) != "PASS" {
		t.Errorf("decoding printed more than the test result:\nstdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
}
