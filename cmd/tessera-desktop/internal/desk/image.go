package desk

import (
	"fmt"
	"image"
	"image/draw"
	_ "image/jpeg" // registers the JPEG decoder for image.Decode
	_ "image/png"  // registers the PNG decoder for image.Decode
	"io"
	"os"
	"path/filepath"
)

// maxImageSide bounds the decoded image (pixels per side) so that a huge
// or hostile file cannot exhaust memory.
const maxImageSide = 16384

// maxShownSide is the largest side the image pane uploads to the GPU.
const maxShownSide = 1024

// LoadedImage is an image the user opened.
type LoadedImage struct {
	Name   string      // file name
	Format string      // "png" or "jpeg"
	W, H   int         // original size
	Img    image.Image // possibly downscaled for display
	Data   []byte      // the encoded file, for the model's vision tower
}

// LoadImageFile decodes a PNG or JPEG file.
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

// DecodeImage decodes a PNG or JPEG stream called name.
func DecodeImage(name string, r io.ReadSeeker) (*LoadedImage, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxImageBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%s: reading: %w", name, err)
	}
	if len(data) > maxImageBytes {
		return nil, fmt.Errorf("%s: larger than %d MiB", name, maxImageBytes>>20)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: rewinding: %w", name, err)
	}
	cfg, format, err := image.DecodeConfig(r)
	if err != nil {
		return nil, fmt.Errorf("%s: not a PNG or JPEG image: %w", name, err)
	}
	if cfg.Width <= 0 || cfg.Height <= 0 || cfg.Width > maxImageSide || cfg.Height > maxImageSide {
		return nil, fmt.Errorf("%s: %d×%d pixels: each side must be 1–%d", name, cfg.Width, cfg.Height, maxImageSide)
	}
	if _, err := r.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("%s: rewinding: %w", name, err)
	}
	img, _, err := image.Decode(r)
	if err != nil {
		return nil, fmt.Errorf("%s: decoding %s: %w", name, format, err)
	}
	return &LoadedImage{Name: name, Format: format, W: cfg.Width, H: cfg.Height, Img: shrink(img, maxShownSide), Data: data}, nil
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
