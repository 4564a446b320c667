//go:build !cgo && (!js || cpuonly)

package wgsl

import (
	"errors"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/vision"
)

// Available reports whether this build has a GPU backend compiled in: false
// without cgo outside the browser, where only the CPU reference runs.
func Available() bool { return false }

// Device is an empty placeholder in builds without a GPU backend, so that
// code naming *wgsl.Device still compiles.
type Device struct{}

// Info returns an empty string in builds without a GPU backend.
func (d *Device) Info() string { return "" }

// Adapter returns the zero AdapterInfo in builds without a GPU backend.
func (d *Device) Adapter() AdapterInfo { return AdapterInfo{} }

// Close does nothing in builds without a GPU backend.
func (d *Device) Close() {}

// RunnerOptions size a GPU Runner (see the cgo build).
type RunnerOptions struct {
	MaxChunk, MaxContext int
	CachePageRows        int
	MemoryBudget         int64
	ExpertSlots          int
	ExpertShare          float64
	CPUMoELayers         int
	UploadFault          func(layer, expert int) error
}

// RunnerStats describes a Runner call (see the cgo build).
type RunnerStats struct {
	Tokens, Dispatches, Submits int
}

// Runner is a placeholder in builds without a GPU backend; NewRunner
// always fails.
type Runner struct{}

// NewRunner fails in builds without a GPU backend.
func NewRunner(d *Device, m *model.Model, opt RunnerOptions) (*Runner, error) {
	return nil, errNoGPU
}

// Close does nothing in builds without a GPU backend.
func (r *Runner) Close() {}

// Device returns nil in builds without a GPU backend.
func (r *Runner) Device() *Device { return nil }

// State is nil in builds without a GPU backend.
func (r *Runner) State() nn.State { return nil }

// Pos returns 0 in builds without a GPU backend.
func (r *Runner) Pos() int { return 0 }

// MaxChunk returns 0 in builds without a GPU backend.
func (r *Runner) MaxChunk() int { return 0 }

// MaxContext returns 0 in builds without a GPU backend.
func (r *Runner) MaxContext() int { return 0 }

// Stats returns zero stats in builds without a GPU backend.
func (r *Runner) Stats() RunnerStats { return RunnerStats{} }

// ExpertStats returns zero stats in builds without a GPU backend.
func (r *Runner) ExpertStats() ExpertStats { return ExpertStats{} }

// Reset fails in builds without a GPU backend.
func (r *Runner) Reset() error { return errNoGPU }

// Forward fails in builds without a GPU backend.
func (r *Runner) Forward(tokens []int, logits []float32) error { return errNoGPU }

// Greedy fails in builds without a GPU backend.
func (r *Runner) Greedy(tokens []int) (int, error) { return 0, errNoGPU }

var errNoGPU = errors.New("wgsl: built without a GPU backend (cgo or js)")

// Config returns nil in builds without a GPU backend.
func (r *Runner) Config() *config.Config { return nil }

// ForwardEmbeddings fails in builds without a GPU backend.
func (r *Runner) ForwardEmbeddings([]float32, int, []float32) error { return errNoGPU }

// VisionTower is an empty placeholder in builds without a GPU backend.
type VisionTower struct{}

// NewVisionTower fails in builds without a GPU backend.
func NewVisionTower(d *Device, t *vision.Tower, maxPatches int) (*VisionTower, error) {
	return nil, errNoGPU
}

// Close does nothing in builds without a GPU backend.
func (v *VisionTower) Close() {}

// MaxPatches is 0 in builds without a GPU backend.
func (v *VisionTower) MaxPatches() int { return 0 }

// Encode fails in builds without a GPU backend.
func (v *VisionTower) Encode(px *imageio.Patches) ([]float32, error) { return nil, errNoGPU }
