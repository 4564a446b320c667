// Package imageio turns image files into the patch matrices a vision tower
// consumes: header-first decoding with size caps (JPEG, PNG, GIF, WebP),
// EXIF orientation for JPEG, smart resize to the patch grid, resampling,
// mean/std normalisation and patchification in merge-window order.
//
// Native builds decode JPEG with github.com/gen2brain/jpegli (libjpeg-style
// C code compiled to WebAssembly, run by wazero) and fall back to the
// standard library's image/jpeg for the files jpegli refuses; Info.Decoder
// says which one decoded an image. BENCHMARKS.md has jpegli's cost and its
// pixel difference from libjpeg-turbo, next to image/jpeg's. The browser
// build registers no decoder: there the browser decodes images.
//
// Pixel conventions: an RGB image is 8-bit, row-major, 3 bytes per pixel.
// Transparent pixels are composited over white. The float pipeline keeps
// values in [0, 255] until normalisation (no intermediate uint8 rounding
// after the resize, unlike PIL).
package imageio

import (
	"errors"
	"fmt"
	"image"
	"image/color"
	"io"
)

// Limits bounds what Decode accepts, checked on the header before any pixel
// is decoded. A zero field means "use the DefaultLimits value".
type Limits struct {
	MaxPixels int64 // width·height of the stored image
	MaxSide   int   // max(width, height)
	MaxBytes  int64 // encoded file size
}

// DefaultLimits accepts up to 40 megapixels, 16384 px per side and 64 MiB
// of encoded data.
var DefaultLimits = Limits{MaxPixels: 40_000_000, MaxSide: 16384, MaxBytes: 64 << 20}

func (l Limits) orDefault() Limits {
	if l.MaxPixels <= 0 {
		l.MaxPixels = DefaultLimits.MaxPixels
	}
	if l.MaxSide <= 0 {
		l.MaxSide = DefaultLimits.MaxSide
	}
	if l.MaxBytes <= 0 {
		l.MaxBytes = DefaultLimits.MaxBytes
	}
	return l
}

// ErrTooLarge is wrapped by every error that rejects an image for its size.
var ErrTooLarge = errors.New("image too large")

// RGB is an 8-bit RGB image: pixel (x, y) channel c is Pix[(y·W+x)·3+c].
type RGB struct {
	W, H int
	Pix  []uint8
}

// Info is what the header says about an encoded image.
type Info struct {
	Format      string // "jpeg", "png", "gif" or "webp"
	W, H        int    // stored size, before EXIF orientation
	Orientation int    // EXIF orientation 1…8 (1 when absent or not JPEG)
	// Decoder names the decoder that produced the pixels (set by Decode,
	// empty after Probe): DecoderJPEGLI or DecoderStdJPEG for JPEG,
	// "image/png", "image/gif" or "golang.org/x/image/webp" for the others.
	Decoder string
}

var allowed = map[string]bool{"jpeg": true, "png": true, "gif": true, "webp": true}

// CheckLimits returns an error wrapping ErrTooLarge if a w×h image exceeds
// lim (w·h > MaxPixels or max(w, h) > MaxSide), or if a side is not positive.
func CheckLimits(w, h int, lim Limits) error {
	lim = lim.orDefault()
	if w <= 0 || h <= 0 {
		return fmt.Errorf("image has invalid size %dx%d", w, h)
	}
	if w > lim.MaxSide || h > lim.MaxSide {
		return fmt.Errorf("%w: %dx%d has a side over the %d px cap", ErrTooLarge, w, h, lim.MaxSide)
	}
	if int64(w)*int64(h) > lim.MaxPixels {
		return fmt.Errorf("%w: %dx%d = %d pixels exceeds the cap of %d", ErrTooLarge, w, h, int64(w)*int64(h), lim.MaxPixels)
	}
	return nil
}

// Probe reads only the header of data: format, size and EXIF orientation.
// It rejects formats other than JPEG, PNG, GIF and WebP and sizes over lim.
func Probe(data []byte, lim Limits) (Info, error) {
	lim = lim.orDefault()
	if int64(len(data)) > lim.MaxBytes {
		return Info{}, fmt.Errorf("%w: %d bytes exceeds the cap of %d", ErrTooLarge, len(data), lim.MaxBytes)
	}
	cfg, format, err := decodeConfig(data)
	if err != nil {
		return Info{}, fmt.Errorf("reading image header: %w (supported: JPEG, PNG, GIF, WebP)", err)
	}
	if !allowed[format] {
		return Info{}, fmt.Errorf("image format %q is not supported (want JPEG, PNG, GIF or WebP)", format)
	}
	if err := CheckLimits(cfg.Width, cfg.Height, lim); err != nil {
		return Info{}, err
	}
	in := Info{Format: format, W: cfg.Width, H: cfg.Height, Orientation: 1}
	if format == "jpeg" {
		in.Orientation = JPEGOrientation(data)
	}
	return in, nil
}

// Decode decodes an encoded image after checking its header against lim,
// applies the EXIF orientation (JPEG) and returns it as RGB (first frame of
// a GIF; alpha composited over white).
func Decode(data []byte, lim Limits) (*RGB, Info, error) {
	in, err := Probe(data, lim)
	if err != nil {
		return nil, in, err
	}
	img, decoder, err := decodeImage(data, in.Format)
	if err != nil {
		return nil, in, fmt.Errorf("decoding %s image: %w", in.Format, err)
	}
	in.Decoder = decoder
	b := img.Bounds()
	if b.Dx() != in.W || b.Dy() != in.H {
		return nil, in, fmt.Errorf("decoding %s image: header says %dx%d but pixels are %dx%d", in.Format, in.W, in.H, b.Dx(), b.Dy())
	}
	return Orient(toRGB(img), in.Orientation), in, nil
}

// DecodeReader reads at most lim.MaxBytes from r and calls Decode.
func DecodeReader(r io.Reader, lim Limits) (*RGB, Info, error) {
	lim = lim.orDefault()
	data, err := io.ReadAll(io.LimitReader(r, lim.MaxBytes+1))
	if err != nil {
		return nil, Info{}, fmt.Errorf("reading image: %w", err)
	}
	return Decode(data, lim)
}

// FromRGBA wraps non-premultiplied RGBA pixels (4 bytes per pixel, as from
// a browser's ImageData) as RGB, compositing over white:
//
//	out = (c·a + 255·(255 − a)) / 255, rounded.
func FromRGBA(w, h int, pix []uint8, lim Limits) (*RGB, error) {
	if err := CheckLimits(w, h, lim); err != nil {
		return nil, err
	}
	if len(pix) != w*h*4 {
		return nil, fmt.Errorf("RGBA buffer has %d bytes, a %dx%d image needs %d", len(pix), w, h, w*h*4)
	}
	out := &RGB{W: w, H: h, Pix: make([]uint8, w*h*3)}
	for i := 0; i < w*h; i++ {
		a := uint32(pix[i*4+3])
		for c := 0; c < 3; c++ {
			out.Pix[i*3+c] = over(uint32(pix[i*4+c]), a)
		}
	}
	return out, nil
}

// over composites channel value c with alpha a over white.
func over(c, a uint32) uint8 {
	return uint8((c*a + 255*(255-a) + 127) / 255)
}

// toRGB converts any decoded image to RGB, with fast paths for the types
// the registered decoders return most often.
func toRGB(img image.Image) *RGB {
	b := img.Bounds()
	w, h := b.Dx(), b.Dy()
	out := &RGB{W: w, H: h, Pix: make([]uint8, w*h*3)}
	switch m := img.(type) {
	case *image.YCbCr:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				yi := m.YOffset(b.Min.X+x, b.Min.Y+y)
				ci := m.COffset(b.Min.X+x, b.Min.Y+y)
				r, g, bb := color.YCbCrToRGB(m.Y[yi], m.Cb[ci], m.Cr[ci])
				o := (y*w + x) * 3
				out.Pix[o], out.Pix[o+1], out.Pix[o+2] = r, g, bb
			}
		}
	case *image.Gray:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				v := m.Pix[m.PixOffset(b.Min.X+x, b.Min.Y+y)]
				o := (y*w + x) * 3
				out.Pix[o], out.Pix[o+1], out.Pix[o+2] = v, v, v
			}
		}
	case *image.NRGBA:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				s := m.Pix[m.PixOffset(b.Min.X+x, b.Min.Y+y):]
				a := uint32(s[3])
				o := (y*w + x) * 3
				for c := 0; c < 3; c++ {
					out.Pix[o+c] = over(uint32(s[c]), a)
				}
			}
		}
	default:
		for y := 0; y < h; y++ {
			for x := 0; x < w; x++ {
				c := color.NRGBAModel.Convert(img.At(b.Min.X+x, b.Min.Y+y)).(color.NRGBA)
				a := uint32(c.A)
				o := (y*w + x) * 3
				out.Pix[o] = over(uint32(c.R), a)
				out.Pix[o+1] = over(uint32(c.G), a)
				out.Pix[o+2] = over(uint32(c.B), a)
			}
		}
	}
	return out
}
