package imageio

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzDecode: no input makes decoding or preprocessing panic, and a decoded
// image always respects the limits it was decoded under.
func FuzzDecode(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "images", "*.*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil && len(b) < 1<<16 {
			f.Add(b)
		}
	}
	f.Add([]byte("\x89PNG\r\n\x1a\n"))
	f.Add([]byte("\xff\xd8\xff\xe1\x00\x10Exif\x00\x00MM\x00*\x00\x00\x00\x08"))
	lim := Limits{MaxPixels: 1 << 20, MaxSide: 2048, MaxBytes: 1 << 20}
	f.Fuzz(func(t *testing.T, data []byte) {
		img, info, err := Decode(data, lim)
		if err != nil {
			return
		}
		if int64(info.W)*int64(info.H) > lim.MaxPixels || img == nil || len(img.Pix) != 3*img.W*img.H {
			t.Fatalf("decoded %dx%d beyond the limits or inconsistent", info.W, info.H)
		}
		opt := Options{PatchSize: 14, MergeH: 2, MergeW: 2, MinPixels: 56 * 56, MaxPixels: 112 * 112,
			Mean: [3]float32{0.5, 0.5, 0.5}, Std: [3]float32{0.5, 0.5, 0.5}}
		if _, err := Preprocess(img, opt); err != nil {
			return
		}
	})
}
