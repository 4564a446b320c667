package desk

import (
	"fmt"
	"image"
	"image/draw"
	"io"
	"os"
	"path/filepath"

	"github.com/tessera-llm/tessera/core/imageio"
)

// maxImageSide bounds the decoded image (pixels per side) so that a huge
// or hostile file cannot exhaust memory.
const maxImageSide = 16384

// maxShownSide is the largest side the image pane uploads to the GPU.
const maxShownSide = 1024

// LoadedImage is an image the user opened.
type LoadedImage struct {
	Name    string      // file name
	Format  string      // "jpeg", "png", "gif" or "webp"
	Decoder string      // what decoded it: "jpegli" for JPEG (image/jpeg for files jpegli refuses), …
	W, H    int         // size as shown, after EXIF orientation
	Img     image.Image // possibly downscaled for display
	Data    []byte      // the encoded file, for the model's vision tower
}

// LoadImageFile decodes an image file (JPEG, PNG, GIF or WebP).
func LoadImageFile(path string) (*LoadedImage, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("opening image: %w", err)
	}
	defer f.Close()
	return DecodeImage(filepath.Base(path), f)
}

// maxImageBytes bounds the encoded file kept for the model.
const maxImageBytes = 64 << 20

// DecodeImage decodes an image stream called name with the decoder the
// model uses (core/imageio: jpegli for JPEG, EXIF orientation applied), so
// the pane shows what the vision tower sees.
func DecodeImage(name string, r io.Reader) (*LoadedImage, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading: %w", name, err)
	}
	if len(data) > maxImageBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, maxImageBytes>>20)
	}
	rgb, info, err := imageio.Decode(data, imageio.Limits{MaxSide: maxImageSide, MaxBytes: maxImageBytes})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	img := image.NewRGBA(image.Rect(0, 0, rgb.W, rgb.H))
	for i := 0; i < rgb.W*rgb.H; i++ {
		copy(img.Pix[i*4:i*4+3], rgb.Pix[i*3:i*3+3])
		img.Pix[i*4+3] = 255
	}
	return &LoadedImage{Name: name, Format: info.Format, Decoder: info.Decoder, W: rgb.W, H: rgb.H,
		Img: shrink(img, maxShownSide), Data: data}, nil
}

// shrink returns img scaled down (box filter) so that neither side exceeds
// side; smaller images are returned as they are.
func shrink(img image.Image, side int) image.Image {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	f := (max(w, h) + side - 1) / side
	if f <= 1 {
		return img
	}
	src := image.NewRGBA(image.Rect(0, 0, w, h))
	draw.Draw(src, src.Bounds(), img, b.Min, draw.Src)
	ow, oh := max(1, w/f), max(1, h/f)
	dst := image.NewRGBA(image.Rect(0, 0, ow, oh))
	for y := 0; y < oh; y++ {
		for x := 0; x < ow; x++ {
			var acc [4]int
			for dy := 0; dy < f; dy++ {
				row := src.Pix[(y*f+dy)*src.Stride:]
				for dx := 0; dx < f; dx++ {
					p := row[(x*f+dx)*4:]
					for c := range acc {
						acc[c] += int(p[c])
					}
				}
			}
			o := dst.Pix[y*dst.Stride+x*4:]
			for c := range acc {
				o[c] = uint8(acc[c] / (f * f))
			}
		}
	}
	return dst
}
