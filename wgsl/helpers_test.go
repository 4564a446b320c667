//go:build cgo && !js

package wgsl_test

import (
	"math"
	"math/rand/v2"
	"os"
	"sync"
	"testing"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/native"
	"github.com/tessera-llm/tessera/wgsl"
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

func randVec(r *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = (r.Float32()*2 - 1) * scale
	}
	return v
}

// randMat returns a rows×cols matrix of dt with values in (−scale, scale).
func randMat(r *rand.Rand, rows, cols int, dt tensor.DType, scale float32) *tensor.Mat {
	v := randVec(r, rows*cols, scale)
	switch dt {
	case tensor.F16:
		u := make([]uint16, len(v))
		half.EncodeF16(u, v)
		return tensor.NewHalf(rows, cols, dt, u)
	case tensor.BF16:
		u := make([]uint16, len(v))
		half.EncodeBF16(u, v)
		return tensor.NewHalf(rows, cols, dt, u)
	}
	return tensor.NewF32(rows, cols, v)
}

// nmse is Σ(got−want)² / Σwant² (or the plain Σ(got−want)² when want is 0);
// NaN or a length mismatch gives +Inf.
func nmse(got, want []float32) float64 {
	if len(got) != len(want) {
		return math.Inf(1)
	}
	var num, den float64
	for i := range got {
		g, w := float64(got[i]), float64(want[i])
		if math.IsNaN(g) || math.IsInf(g, 0) {
			return math.Inf(1)
		}
		num += (g - w) * (g - w)
		den += w * w
	}
	if den == 0 {
		return num
	}
	return num / den
}

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
