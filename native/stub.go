//go:build !cgo || js

package native

import (
	"errors"

	"github.com/tessera-llm/tessera/wgsl"
)

// Available reports whether this build can talk to wgpu-native: false in
// builds without cgo and in the browser (GOOS=js acquires its device from
// navigator.gpu instead).
const Available = false

// ErrUnavailable is returned by Open in builds without wgpu-native.
var ErrUnavailable = errors.New("native: built without cgo (or for js): no wgpu-native backend")

// Open always fails in this build.
func Open() (*wgsl.Device, error) { return nil, ErrUnavailable }

// OpenQuiet always fails in this build.
func OpenQuiet() (*wgsl.Device, error) { return nil, ErrUnavailable }
