//go:build !cgo && !js

package wgsl

// Available reports whether this build has a GPU backend compiled in: false
// without cgo outside the browser, where only the CPU reference runs.
func Available() bool { return false }

// Device is an empty placeholder in builds without a GPU backend, so that
// code naming *wgsl.Device still compiles.
type Device struct{}

// Info returns an empty string in builds without a GPU backend.
func (d *Device) Info() string { return "" }

// Close does nothing in builds without a GPU backend.
func (d *Device) Close() {}
