//go:build cgo && !js

// Package native acquires a WebGPU device through wgpu-native (Vulkan,
// Metal or DX12) and hands it to the portable backend in package wgsl.
// Everything else — buffers, pipelines, dispatch, readback — lives in wgsl
// and is shared with the browser build.
//
// Workarounds for github.com/cogentcore/webgpu v0.23.0 applied here (see
// docs/webgpu.md in the shared docs): the instance is always created with
// CreateInstance(nil) (a non-nil descriptor aborts intermittently) and the
// device with RequestDevice(nil) (required limits are corrupted by the
// binding), so kernels are written for the WebGPU default limits. The device
// lost callback is never set (it always panics).
package native

import (
	"errors"
	"fmt"
	"os"
	"sync"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/tessera-llm/tessera/wgsl"
)

// Available reports whether this build can talk to wgpu-native.
const Available = true

var logOnce sync.Once

// Open creates a wgpu-native instance, picks the high-performance adapter
// and returns a wgsl.Device on it. The adapter's name, driver and backend
// are logged once per process (unless TESSERA_GPU_QUIET is set) so a run that
// silently fell back to a CPU driver such as lavapipe is visible. The
// returned device owns the instance and adapter; Close releases them.
func Open() (*wgsl.Device, error) { return open(true) }

// OpenQuiet is Open without the adapter line on stderr, for callers that
// report the adapter themselves (the CLI prints it once the model is on
// the GPU, so a failure is one line).
func OpenQuiet() (*wgsl.Device, error) { return open(false) }

func open(logAdapter bool) (*wgsl.Device, error) {
	quietMesa()
	wgpu.SetLogLevel(wgpu.LogLevelError) // drop harmless EGL-probe warnings
	inst := wgpu.CreateInstance(nil)     // nil only: bug 2
	if inst == nil {
		return nil, errors.New("native: wgpu CreateInstance returned nil")
	}
	ad, err := inst.RequestAdapter(&wgpu.RequestAdapterOptions{PowerPreference: wgpu.PowerPreferenceHighPerformance})
	if err != nil || ad == nil {
		inst.Release()
		return nil, fmt.Errorf("native: no WebGPU adapter (is a Vulkan driver installed? try scripts/setup.sh gpu): %v", err)
	}
	info := ad.GetInfo()
	dev, err := ad.RequestDevice(nil) // default limits only: bug 1
	if err != nil || dev == nil {
		ad.Release()
		inst.Release()
		return nil, fmt.Errorf("native: request device on %q (%s): %v", info.Name, info.DriverDescription, err)
	}
	desc := fmt.Sprintf("%s | driver %s | %s | %s", info.Name, info.DriverDescription, info.BackendType, info.AdapterType)
	if logAdapter {
		logOnce.Do(func() {
			if os.Getenv("TESSERA_GPU_QUIET") == "" {
				fmt.Fprintf(os.Stderr, "tessera: GPU adapter %s\n", desc)
			}
		})
	}
	d, err := wgsl.NewDevice(dev, desc, func() {
		dev.Release()
		ad.Release()
		inst.Release()
	})
	if err != nil {
		dev.Release()
		ad.Release()
		inst.Release()
		return nil, fmt.Errorf("native: %w", err)
	}
	d.SetAdapter(wgsl.AdapterInfo{Name: info.Name, Vendor: info.VendorName, Architecture: info.Architecture,
		Driver: info.DriverDescription, Type: info.AdapterType.String()})
	return d, nil
}

// quietMesa gives Mesa's Vulkan drivers the private runtime directory they
// expect on headless machines (without one every instance prints
// "XDG_RUNTIME_DIR is invalid"). An existing setting is kept.
func quietMesa() {
	if os.Getenv("XDG_RUNTIME_DIR") != "" {
		return
	}
	dir := fmt.Sprintf("%s/tessera-xdg-%d", os.TempDir(), os.Getuid())
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return
	}
	if st, err := os.Stat(dir); err == nil && st.Mode().Perm() == 0o700 {
		os.Setenv("XDG_RUNTIME_DIR", dir)
	}
}
