// Package conformance holds the GPU kernel conformance cases of package
// wgsl: every op × dtype × shape run on a wgsl.Device and compared with its
// core/ref oracle. The native tests (wgsl/conformance_test.go) run them all
// on wgpu-native; the browser bundle built with -tags webgpu runs a subset
// inside the page on the browser's WebGPU (tesseraWasm.conformance), so the
// same kernels are checked on both implementations.
package conformance
