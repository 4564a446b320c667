//go:build cgo && !js

package wgsl_test

import (
	"os"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
	"github.com/tessera-llm/tessera/wgsl/conformance"
)

var (
	devOnce sync.Once
	dev     *wgsl.Device
	devErr  error
)

// device returns the shared test device. Without an adapter the test is
// skipped, except under CI=true, where it fails: CI installs lavapipe.
func device(t testing.TB) *wgsl.Device {
	t.Helper()
	devOnce.Do(func() { dev, devErr = native.Open() })
	if devErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no GPU adapter under CI=true (run scripts/setup.sh gpu): %v", devErr)
		}
		t.Skipf("no GPU adapter: %v", devErr)
	}
	return dev
}

var dtypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16}

var (
	randVec = conformance.RandVec
	randMat = conformance.RandMat
	nmse    = conformance.NMSE
)

// gpu is the conformance package's device helper (must-style upload and
// readback), its buffers freed when the test ends.
type gpu = conformance.GPU

func newGPU(t testing.TB) *gpu {
	g := conformance.NewGPU(t, device(t))
	t.Cleanup(g.Release)
	return g
}

func check(g *gpu, err error) {
	g.Check(err)
}
