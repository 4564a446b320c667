//go:build !js

package imageio

// Registered decoders: the only formats Decode accepts. The browser build
// (GOOS=js) leaves them out: there the browser decodes images
// (createImageBitmap) and hands RGBA pixels to FromRGBA, and the wasm
// bundle stays smaller. JPEG pixels come from jpegli (jpeg.go); image/jpeg
// reads JPEG headers and decodes the files jpegli refuses.
import (
	"bytes"
	"image"
	_ "image/gif"
	"image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)

// Decoder names reported in Info.Decoder.
const (
	DecoderJPEGLI  = "jpegli"     // github.com/gen2brain/jpegli, the JPEG decoder of native builds
	DecoderStdJPEG = "image/jpeg" // the standard library, for JPEG files jpegli refuses
)

// decoderOf names the decoder of the formats other than JPEG.
var decoderOf = map[string]string{"png": "image/png", "gif": "image/gif", "webp": "golang.org/x/image/webp"}

// jpegMagic starts every JPEG file (SOI marker).
const jpegMagic = "\xff\xd8"

// decodeConfig reads the header of data. JPEG headers are read by
// image/jpeg, never through image.DecodeConfig: jpegli registers "jpeg"
// with the image package too, and its DecodeConfig looks only at the first
// KiB, so a JPEG with a larger EXIF block would be refused there.
func decodeConfig(data []byte) (image.Config, string, error) {
	if bytes.HasPrefix(data, []byte(jpegMagic)) {
		cfg, err := jpeg.DecodeConfig(bytes.NewReader(data))
		return cfg, "jpeg", err
	}
	return image.DecodeConfig(bytes.NewReader(data))
}

// decodeImage decodes the pixels of data, whose header said format, and
// names the decoder that produced them.
func decodeImage(data []byte, format string) (image.Image, string, error) {
	if format == "jpeg" {
		return decodeJPEG(data)
	}
	img, _, err := image.Decode(bytes.NewReader(data))
	return img, decoderOf[format], err
}
