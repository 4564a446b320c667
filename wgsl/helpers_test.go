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

// gpu is a small helper bundling a device with must-style upload/read for tests.
type gpu struct {
	t    testing.TB
	d    *wgsl.Device
	bufs []*wgsl.Buffer
}

func newGPU(t testing.TB) *gpu {
	g := &gpu{t: t, d: device(t)}
	t.Cleanup(func() {
		for _, b := range g.bufs {
			b.Release()
		}
	})
	return g
}

func (g *gpu) up(v []float32) wgsl.View {
	g.t.Helper()
	b, err := g.d.UploadF32(v)
	if err != nil {
		g.t.Fatal(err)
	}
	g.bufs = append(g.bufs, b)
	return b.At(0)
}

func (g *gpu) zeros(n int) wgsl.View {
	g.t.Helper()
	b, err := g.d.NewBuffer(max(n, 1))
	if err != nil {
		g.t.Fatal(err)
	}
	g.bufs = append(g.bufs, b)
	return b.At(0)
}

func (g *gpu) mat(m *tensor.Mat) *wgsl.Mat {
	g.t.Helper()
	w, err := g.d.UploadMat(m)
	if err != nil {
		g.t.Fatal(err)
	}
	g.bufs = append(g.bufs, w.Buf)
	return w
}

func (g *gpu) read(v wgsl.View, n int) []float32 {
	g.t.Helper()
	out := make([]float32, n)
	if err := g.d.ReadF32(v, out); err != nil {
		g.t.Fatal(err)
	}
	return out
}

func check(g *gpu, err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}
