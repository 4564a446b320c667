//go:build !js && !wasip1

package imageio

import (
	"bytes"
	"image/jpeg"
	"testing"

	"github.com/gen2brain/jpegli"
)

// TestJPEGLiVsStdlib decodes the test JPEGs with jpegli (the design card's
// choice) and image/jpeg (what Decode uses) and bounds their difference.
// docs/offline-resources.md §7 measured ≤ 30 levels (mean 0.215) on photos;
// image/jpeg is faster here, so production decoding stays on the stdlib.
func TestJPEGLiVsStdlib(t *testing.T) {
	for _, name := range []string{"quadrants.jpg", "quadrants-exif6.jpg"} {
		data := read(t, name)
		a, err := jpeg.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatal(err)
		}
		b, err := jpegli.Decode(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: jpegli: %v", name, err)
		}
		ra, rb := toRGB(a), toRGB(b)
		if ra.W != rb.W || ra.H != rb.H {
			t.Fatalf("%s: sizes %dx%d vs %dx%d", name, ra.W, ra.H, rb.W, rb.H)
		}
		maxd, sum := 0, 0
		for i := range ra.Pix {
			d := absd(ra.Pix[i], rb.Pix[i])
			maxd = max(maxd, d)
			sum += d
		}
		mean := float64(sum) / float64(len(ra.Pix))
		t.Logf("%s: max |Δ| %d, mean %.3f", name, maxd, mean)
		if maxd > 40 || mean > 3 {
			t.Errorf("%s: jpegli and image/jpeg differ by max %d, mean %.3f (want ≤ 40, ≤ 3)", name, maxd, mean)
		}
	}
}
