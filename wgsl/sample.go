//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
	"math"

	"math/bits"
)

// Op wrappers of sample.wgsl.

// SampleParams are the settings of one draw on the GPU: those of
// generate.SamplerOptions the kernel implements, and the sampler's uniform
// draw U in [0, 1) (generate.Sampler.Draw), so a seeded session picks the
// same tokens on the GPU as on the CPU.
type SampleParams struct {
	Temperature float32 // > 0 (0 is greedy: use Argmax)
	TopK        int     // 0: all
	TopP, MinP  float32 // 0 (or TopP 1): off
	U           float64
}

// samplePasses bounds the passes of sample.wgsl over the logits (each
// invocation loops ⌈n/256⌉ times per pass): reductions, the top-k radix
// select, and up to three order searches of 32 + log2 n passes.
func samplePasses(n int) int {
	idbits := max(1, bits.Len(uint(n-1)))
	return 84 + 3*idbits
}

// SampleOnGPU reports whether Sample can draw from n logits within the
// per-invocation loop budget (about 60 K logits; larger vocabularies are
// sampled on the host).
func SampleOnGPU(n int) bool {
	return n > 0 && (n+255)/256*samplePasses(n) <= loopBudget
}

// Sample records out[0] = the token generate.Sampler (without repetition
// penalty) picks from the n logits at x for the draw o.U: temperature,
// top-k (ties to the lowest ids), min-p, top-p and the draw over the
// kept tokens in (logit desc, id asc) order, in one workgroup, without
// sorting (sample.wgsl). scratch holds n words of weights. Sums run in
// f32 on the GPU and in f64 on the host, so a draw within ~1e-6 of a
// boundary between two tokens may pick the neighbour.
func (d *Device) Sample(out, x, scratch View, n int, o SampleParams) error {
	switch {
	case n <= 0:
		return fmt.Errorf("wgsl: Sample of %d values", n)
	case !SampleOnGPU(n):
		return fmt.Errorf("wgsl: Sample: %d values exceed the per-invocation loop budget", n)
	case !(o.Temperature > 0) || math.IsInf(float64(o.Temperature), 0):
		return fmt.Errorf("wgsl: Sample: temperature %g (want > 0; use Argmax for greedy)", o.Temperature)
	case o.TopK < 0 || o.TopP < 0 || o.TopP > 1 || o.MinP < 0 || o.MinP > 1 || o.U < 0 || o.U >= 1:
		return fmt.Errorf("wgsl: Sample: top-k %d, top-p %g, min-p %g, draw %g out of range", o.TopK, o.TopP, o.MinP, o.U)
	}
	if err := x.check(n, "Sample x"); err != nil {
		return err
	}
	if err := scratch.check(n, "Sample scratch"); err != nil {
		return err
	}
	if err := out.check(1, "Sample out"); err != nil {
		return err
	}
	k, err := d.kernel("sample.wgsl", "main", 3)
	if err != nil {
		return err
	}
	p := params{}.u(n, x.Off, out.Off, scratch.Off, o.TopK).f(o.Temperature, o.TopP, o.MinP, float32(o.U))
	return d.dispatch(k, p, []*Buffer{x.Buf, out.Buf, scratch.Buf}, 1)
}
