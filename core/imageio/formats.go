//go:build !js

package imageio

// Registered decoders: the only formats Decode accepts. The browser build
// (GOOS=js) leaves them out: there the browser decodes images
// (createImageBitmap) and hands RGBA pixels to FromRGBA, and the wasm
// bundle stays smaller.
import (
	_ "image/gif"
	_ "image/jpeg"
	_ "image/png"

	_ "golang.org/x/image/webp"
)
