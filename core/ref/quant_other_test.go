//go:build !amd64 || purego

package ref

// withInt8Generic runs f with the integer path on the generic kernels
// (not the browser's SIMD128 module).
func withInt8Generic(f func()) {
	prev, err := SetInt8Kernels("go")
	if err != nil {
		panic(err)
	}
	defer SetInt8Kernels(prev)
	f()
}
