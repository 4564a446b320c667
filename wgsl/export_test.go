//go:build cgo || js

package wgsl

// SetGridXForTest lowers the widest grid dimension and returns a function
// restoring it.
func SetGridXForTest(x int) func() {
	old := gridX
	gridX = x
	return func() { gridX = old }
}
