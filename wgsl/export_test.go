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

// BindingForTest is one storage binding of a dispatch.
type BindingForTest = binding

// TraceBindingsForTest calls f with every later dispatch's storage
// bindings (after placeholders and aliases are resolved) and returns a
// function that stops tracing.
func (d *Device) TraceBindingsForTest(f func(kernel string, binds []BindingForTest)) func() {
	d.trace = f
	return func() { d.trace = nil }
}

// SetMatPartWordsForTest lowers the largest matrix part UploadMat keeps in
// one buffer (normally one 128 MiB binding), so small matrices are split,
// and returns a function restoring it.
func SetMatPartWordsForTest(n int) func() {
	old := matPartWords
	matPartWords = n
	return func() { matPartWords = old }
}

// SetGroupExpertsForTest turns the grouped routed-expert path of prefill
// pieces on or off and returns a function restoring it.
func SetGroupExpertsForTest(on bool) func() {
	old := groupExperts
	groupExperts = on
	return func() { groupExperts = old }
}
