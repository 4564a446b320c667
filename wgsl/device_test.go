//go:build cgo && !js

package wgsl_test

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// TestReadbackUnderGCPressure guards the GC-off readback window (binding
// bug 3): readbacks while two goroutines allocate flat out and a third
// forces a GC every 2 ms (through wgsl.GC, as every caller must). The stock
// pattern panics with "misuse of an invalid Handle" within a few hundred
// readbacks; run with GODEBUG=clobberfree=1 to make a regression crash at once.
func TestReadbackUnderGCPressure(t *testing.T) {
	g := newGPU(t)
	n := 300
	if testing.Short() {
		n = 100
	}
	x := g.Up(make([]float32, 64))
	var stop atomic.Bool
	var wg sync.WaitGroup
	var sink atomic.Pointer[[]byte]
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				b := make([]byte, 1<<12)
				sink.Store(&b)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for !stop.Load() {
			wgsl.GC()
			time.Sleep(2 * time.Millisecond)
		}
	}()
	defer func() { stop.Store(true); wg.Wait() }()
	one := g.Up(onesVec(64))
	out := make([]float32, 64)
	for i := 1; i <= n; i++ {
		check(g, g.D.Add(x, x, one, 64, 1))
		check(g, g.D.ReadF32(x, out))
		if out[0] != float32(i) || out[63] != float32(i) {
			t.Fatalf("readback %d: got %v, %v", i, out[0], out[63])
		}
	}
}

func onesVec(n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = 1
	}
	return v
}

// TestManyDispatchesOneStep records more dispatches than the uniform arena
// holds (forcing an automatic flush mid-step) and checks they all ran in order.
func TestManyDispatchesOneStep(t *testing.T) {
	g := newGPU(t)
	y := g.Up(make([]float32, 5))
	x := g.Up(onesVec(5))
	sub := g.D.Submits
	const n = 5000
	for i := 0; i < n; i++ {
		check(g, g.D.Axpy(float32(i%3), x, y, 5))
	}
	got := g.Read(y, 5)
	var want float32
	for i := 0; i < n; i++ {
		want += float32(i % 3)
	}
	if got[4] != want {
		t.Fatalf("got %v, want %v", got[4], want)
	}
	if s := g.D.Submits - sub; s < 2 || s > 4 {
		t.Errorf("%d submits for %d dispatches", s, n)
	}
}

// TestBadInputErrors checks that malformed calls return errors, not panics
// or device errors.
func TestBadInputErrors(t *testing.T) {
	g := newGPU(t)
	x := g.Up(make([]float32, 16))
	W := g.Mat(tensor.NewF32(4, 4, make([]float32, 16)))
	rel, err := g.D.NewBuffer(4)
	check(g, err)
	rel.Release()
	for name, err := range map[string]error{
		"linear out too small": g.D.Linear(x, x, 5, W),
		"linear nil W":         g.D.Linear(x, x, 1, nil),
		"negative offset":      g.D.RMSNorm(wgsl.View{Buf: x.Buf, Off: -1}, x, x, 1, 4, 1e-6),
		"released buffer":      g.D.Add(rel.At(0), x, x, 4, 1),
		"router too many":      g.D.Route(x, x, x, wgsl.View{}, 1, 2000, ref.Router{TopK: 2}),
		"router k > E":         g.D.Route(x, x, x, wgsl.View{}, 1, 4, ref.Router{TopK: 5}),
		"attnres many sources": g.D.AttnRes(x.Rows(1), x.Rows(1), 1, 65, 1, 1, x, x, 1e-6),
		"conv K=1":             g.D.ShortConv(x, x, x, x, 1, 4, 1),
		"read past end":        g.D.ReadF32(x, make([]float32, 17)),
		"zero buffer":          func() error { _, err := g.D.NewBuffer(0); return err }(),
		"nil matrix upload":    func() error { _, err := g.D.UploadMat(nil); return err }(),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// The device still works afterwards.
	check(g, g.D.Add(x, x, x, 16, 1))
	g.Read(x, 16)
}

// TestBufferCycles creates and releases buffers and bind groups many times
// (binding bug 6: nothing is finalised, so everything must be released).
func TestBufferCycles(t *testing.T) {
	g := newGPU(t)
	for i := 0; i < 200; i++ {
		a, err := g.D.UploadF32(onesVec(1024))
		check(g, err)
		check(g, g.D.Add(a.At(0), a.At(0), a.At(0), 1024, 1))
		out := make([]float32, 1)
		check(g, g.D.ReadF32(a.At(1023), out))
		if out[0] != 2 {
			t.Fatalf("cycle %d: %v", i, out[0])
		}
		a.Release()
	}
}

func benchLinear(b *testing.B, rows, cols, T, batch int, dt tensor.DType) {
	g := newGPU(b)
	r := rand.New(rand.NewPCG(1, 2))
	W := g.Mat(randMat(r, rows, cols, dt, 1))
	x := g.Up(randVec(r, T*cols, 1))
	out := g.Zeros(T * rows)
	check(g, g.D.Linear(out, x, T, W))
	check(g, g.D.Sync())
	b.SetBytes(int64(batch) * int64(wgsl.MatWords(rows, cols, dt)) * 4)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j := 0; j < batch; j++ {
			if err := g.D.Linear(out, x, T, W); err != nil {
				b.Fatal(err)
			}
		}
		if err := g.D.Sync(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkLinearGEMV reports weight bytes streamed per second for T=1
// (decode). "x8" records 8 GEMVs per submission, as a decode step would.
// lavapipe numbers are a CPU baseline, not GPU numbers.
func BenchmarkLinearGEMV(b *testing.B) {
	for _, dt := range dtypes[:2] {
		for _, s := range [][3]int{{1024, 1024, 1}, {4096, 4096, 1}, {4096, 4096, 8}} {
			b.Run(fmt.Sprintf("%v/%dx%d/x%d", dt, s[0], s[1], s[2]), func(b *testing.B) {
				benchLinear(b, s[0], s[1], 1, s[2], dt)
			})
		}
	}
}

// BenchmarkLinearGEMM is prefill-shaped: 64 tokens.
func BenchmarkLinearGEMM(b *testing.B) {
	for _, dt := range dtypes[:2] {
		b.Run(fmt.Sprintf("%v/1024x1024/T=64", dt), func(b *testing.B) { benchLinear(b, 1024, 1024, 64, 1, dt) })
	}
}
