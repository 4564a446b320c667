//go:build !js

package imageio

import (
	"bytes"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"io"
	"os"
	"sync"

	"github.com/gen2brain/jpegli"
)

// decodeJPEG decodes a JPEG with jpegli and, when jpegli refuses the file,
// with image/jpeg, which is more lenient with some non-conforming files
// (for example a baseline scan header carrying successive-approximation
// bits). It names the decoder that produced the pixels. When both refuse,
// the error carries both reasons.
//
// A file with no end-of-image marker after its first scan header is not
// given to jpegli: like libjpeg it would fill the missing blocks with gray
// and only warn, where a truncated file should be an error.
func decodeJPEG(data []byte) (image.Image, string, error) {
	var errLi error
	if sos := bytes.Index(data, []byte{0xff, 0xda}); sos < 0 || !bytes.Contains(data[sos:], []byte{0xff, 0xd9}) {
		errLi = errors.New("no end-of-image marker after the scan data (truncated file?)")
	} else {
		startJPEGLI()
		img, err := jpegli.Decode(bytes.NewReader(data))
		if err == nil {
			return img, DecoderJPEGLI, nil
		}
		errLi = err
	}
	img, errStd := jpeg.Decode(bytes.NewReader(data))
	if errStd == nil {
		return img, DecoderStdJPEG, nil
	}
	return nil, "", fmt.Errorf("jpegli: %v; image/jpeg: %w", errLi, errStd)
}

var jpegliOnce sync.Once

// startJPEGLI compiles jpegli's WebAssembly module (once per process, on
// the first JPEG: 0.2–0.4 s) with its diagnostics silenced. jpegli runs
// libjpeg-style C code under wazero, which prints every warning and error
// ("Failed to decode DCT block", …) to the os.Stderr it finds when the
// module is set up; tessera's errors are one line each, with the reason in
// the returned error. So while jpegli.Init runs, os.Stderr is the write
// end of a pipe that is drained and discarded; a line another goroutine
// writes to os.Stderr in that moment is lost with them. When no pipe can
// be made, jpegli's messages go to stderr.
func startJPEGLI() {
	jpegliOnce.Do(func() {
		r, w, err := os.Pipe()
		if err != nil {
			jpegli.Init()
			return
		}
		go func() { _, _ = io.Copy(io.Discard, r) }()
		saved := os.Stderr
		os.Stderr = w
		defer func() { os.Stderr = saved }()
		jpegli.Init()
	})
}
