//go:build !amd64 || purego

package ref

// withInt8Generic runs f: the integer path is always on the generic
// kernels in this build.
func withInt8Generic(f func()) { f() }
