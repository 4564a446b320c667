//go:build cgo || js

package wgsl

import (
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
)

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

// SetRouteInGateUpForTest makes decoded tokens route inside the experts'
// gate/up kernel (on) or in the router's own dispatch (off), whatever the
// adapter, and returns a function restoring the rule.
func SetRouteInGateUpForTest(on bool) func() {
	old := routeInGateUp
	routeInGateUp = func(*Device) bool { return on }
	return func() { routeInGateUp = old }
}

// plainGPU is the GPU backend with its fused capabilities hidden: only
// nn.Backend's basic ops are visible, so a family's forward pass runs
// nn's unfused fallbacks.
type plainGPU struct{ nn.Backend }

// UnfusedForTest rebuilds the runner's forward pass over the GPU backend
// with its fused capabilities hidden.
func (r *Runner) UnfusedForTest(m *model.Model) {
	r.graph = m.Build(plainGPU{r.b}, r.opt.MaxChunk)
}

// WeightBytesForTest is the memory of the runner's weight buffers
// (matrices, expert blocks and vectors; each buffer once).
func (r *Runner) WeightBytesForTest() int64 {
	seen := map[*Buffer]bool{}
	var n int64
	add := func(b *Buffer) {
		if b != nil && !seen[b] {
			seen[b] = true
			n += 4 * int64(b.Words())
		}
	}
	for _, m := range r.b.mats {
		for _, b := range m.Buffers() {
			add(b)
		}
	}
	for _, g := range r.b.glus {
		add(g.GateUp)
		add(g.Down)
	}
	for _, v := range r.b.vecs {
		add(v.Buf)
	}
	return n
}

// SetExpertMajorForTest chooses how a prefill piece routing to more
// experts than the slots runs (expert-major passes, or runs of tokens)
// and returns a function restoring it.
func SetExpertMajorForTest(v bool) func() {
	old := expertMajor
	expertMajor = v
	return func() { expertMajor = old }
}

// ForceKDAChunkedForTest makes KDA pieces of more than one token run the
// chunked kernels (on) or the recurrent kernel (off), whatever their
// shape, and returns a function restoring the automatic choice.
func ForceKDAChunkedForTest(on bool) func() {
	old := kdaPrefill
	kdaPrefill = kdaForceRecurrent
	if on {
		kdaPrefill = kdaForceChunked
	}
	return func() { kdaPrefill = old }
}

// SetKDAChunkRoundWordsForTest lowers the scratch of one round of
// KDAChunked's chunks, so short pieces run in several rounds, and returns
// a function restoring it.
func SetKDAChunkRoundWordsForTest(n int) func() {
	old := kdaChunkRoundWords
	kdaChunkRoundWords = n
	return func() { kdaChunkRoundWords = old }
}
