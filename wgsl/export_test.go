//go:build cgo || js

package wgsl

// SetGridXForTest lowers the widest grid dimension and returns a function
// restoring it.
func SetGridXForTest(x int) func() {
	old := gridX
	gridX = x
	return func() { gridX = old }
}

// ObjectsForTest counts the GPU objects the device has created and caches
// (bind groups, pipelines, scratch buffers) plus the staging size, so a
// test can check that decoding creates nothing per token.
func (d *Device) ObjectsForTest() int {
	return len(d.groups) + len(d.kernels) + len(d.scratch) + int(d.stagingBytes)
}
