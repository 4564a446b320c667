//go:build js

package imageio

import (
	"bytes"
	"image"
)

// In the browser build no decoder is registered (the browser decodes
// images and hands RGBA to FromRGBA), so decodeConfig refuses every
// encoded image with the image package's "unknown format".

func decodeConfig(data []byte) (image.Config, string, error) {
	return image.DecodeConfig(bytes.NewReader(data))
}

func decodeImage(data []byte, format string) (image.Image, string, error) {
	img, _, err := image.Decode(bytes.NewReader(data))
	return img, format, err
}
