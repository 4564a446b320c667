//go:build cgo && !js

package wgsl_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
	"github.com/tessera-llm/tessera/wgsl/conformance"
)

// BenchmarkKDAStep times the KDA core of one decoded token over 12 layers
// (k3-mini's KDA mixers) at k3-micro's and k3-mini's head shapes (4 and 8
// heads of 64) and 32 heads of 128 (two value columns a thread), BF16
// f_b: "fused" is KDAStep (one dispatch a layer), "split" KDAPrep with its
// gate then KDARecurrent (two), as the runner recorded them before
// KDAStep. One submission and wait per token.
func BenchmarkKDAStep(b *testing.B) {
	d := device(b)
	const layers, K = 12, 4
	for _, s := range [][2]int{{4, 64}, {8, 64}, {32, 128}} {
		h, dk := s[0], s[1]
		C := h * dk
		r := rand.New(rand.NewPCG(1, 2))
		up := func(n int, scale float32) wgsl.View {
			buf, err := d.UploadF32(conformance.RandVec(r, n, scale))
			if err != nil {
				b.Fatal(err)
			}
			return buf.At(0)
		}
		x, conv, e := up(3*C+h+dk, 1), up(3*C*K, 1), up(2*C, 1)
		qkvc, gv, o := up(3*C, 0), up(C, 0), up(C, 0)
		W, err := d.UploadMat(conformance.RandMat(r, C, dk, tensor.BF16, 0.3))
		if err != nil {
			b.Fatal(err)
		}
		tail := (K - 1) * C
		var steps []wgsl.KDAStepArgs
		for range layers {
			st := up(h*dk*dk+3*tail, 0.5)
			steps = append(steps, wgsl.KDAStepArgs{H: h, DK: dk, K: K, TailStep: tail, QScale: float32(1 / math.Sqrt(float64(dk))), Eps: 1e-6,
				X: x, Beta: x.Buf.At(x.Off + 3*C), Conv: conv, Tails: st.Buf.At(st.Off + h*dk*dk), S: st, O: o,
				Gate: wgsl.KDAPrepGate{G: gv, FA: x.Buf.At(x.Off + 3*C + h), W: W,
					E: wgsl.KDAGateEpilogue{H: h, DK: dk, DtBias: e, ALog: e.Buf.At(e.Off + C), PerChannel: true, Bounded: true, LowerBound: -5}}})
		}
		for _, fused := range []bool{true, false} {
			b.Run(fmt.Sprintf("H=%d/dk=%d/%s", h, dk, map[bool]string{true: "fused", false: "split"}[fused]), func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					for l := range steps {
						a := &steps[l]
						if fused {
							err = d.KDAStep(a)
						} else if err = d.KDAPrep(qkvc, C, a.X, a.Beta, a.Conv, a.Tails, tail, h, dk, K, a.QScale, a.Eps, &a.Gate); err == nil {
							err = d.KDARecurrent(&wgsl.KDAArgs{T: 1, H: h, DK: dk, DV: dk, Q: qkvc, K: qkvc.Buf.At(qkvc.Off + C),
								V: qkvc.Buf.At(qkvc.Off + 2*C), G: gv, Beta: a.Beta, O: o, S: a.S})
						}
						if err != nil {
							b.Fatal(err)
						}
					}
					if err := d.Sync(); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tok/s")
			})
		}
	}
}
