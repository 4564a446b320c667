//go:build cgo && !js

package wgsl_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tessera-llm/tessera/wgsl"
	"github.com/tessera-llm/tessera/wgsl/conformance"
)

// kdaPrefillArgs uploads a random KDA prefill problem of T tokens and H
// heads of dk (dv = dk), log-decays in (−0.5, 0].
func kdaPrefillArgs(g *conformance.GPU, r *rand.Rand, T, H, dk int) *wgsl.KDAArgs {
	a := conformance.KDAInputs(r, T, H, dk, dk, 0.5)
	return &wgsl.KDAArgs{T: T, H: H, DK: dk, DV: dk, Q: g.Up(a.Q), K: g.Up(a.K), V: g.Up(a.V), G: g.Up(a.G),
		Beta: g.Up(a.Beta), O: g.Zeros(T * H * dk), S: g.Up(a.S)}
}

// benchKDAPrefill times run over one prefill piece per iteration for
// k3-micro's and k3-mini's KDA (4 and 8 heads of 64) and 32 heads of 128,
// pieces of 64 and 256 tokens: wall time (ms/piece) and the process's CPU
// time (cpu-ms/piece: lavapipe's threads run in the process, so on a
// loaded machine this is the steadier figure of a CPU driver's work),
// after one untimed piece (pipeline creation, scratch growth).
func benchKDAPrefill(b *testing.B, run func(g *conformance.GPU, a *wgsl.KDAArgs) error) {
	g := conformance.NewGPU(b, device(b))
	defer g.Release()
	r := rand.New(rand.NewPCG(1, 2))
	for _, s := range [][2]int{{4, 64}, {8, 64}, {32, 128}} {
		for _, T := range []int{64, 256} {
			H, dk := s[0], s[1]
			b.Run(fmt.Sprintf("H=%d/dk=%d/T=%d", H, dk, T), func(b *testing.B) {
				a := kdaPrefillArgs(g, r, T, H, dk)
				if err := run(g, a); err != nil { // warm-up: pipelines, scratch
					b.Fatal(err)
				}
				cpu0 := cpuTime(b)
				for b.Loop() {
					if err := run(g, a); err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(b.Elapsed().Microseconds())/1e3/float64(b.N), "ms/piece")
				b.ReportMetric(float64((cpuTime(b)-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/piece")
			})
		}
	}
}

// kdaSubmissions runs f over a's tokens in submissions of at most
// 64·32·128/(H·DK) tokens (any piece of k3-mini's 8 heads of 64; 64
// tokens of 32 heads of 128), each continuing from the state the last
// wrote: both kernels' cost is linear in T on lavapipe, and a submission
// must stay far below 5 s there even on a loaded machine (bug 5).
func kdaSubmissions(g *conformance.GPU, a *wgsl.KDAArgs, f func(*wgsl.KDAArgs) error) error {
	H, dk, dv := a.H, a.DK, a.DV
	step := max(1, 64*32*128/(H*dk))
	for t0 := 0; t0 < a.T; t0 += step {
		part := *a
		part.T = min(step, a.T-t0)
		part.Q.Off, part.K.Off, part.G.Off = a.Q.Off+t0*H*dk, a.K.Off+t0*H*dk, a.G.Off+t0*H*dk
		part.V.Off, part.O.Off, part.Beta.Off = a.V.Off+t0*H*dv, a.O.Off+t0*H*dv, a.Beta.Off+t0*H
		if err := f(&part); err != nil {
			return err
		}
		if err := g.D.Sync(); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkKDARecurrentPrefill measures the recurrent kernel over a
// prefill piece (kdaSubmissions).
func BenchmarkKDARecurrentPrefill(b *testing.B) {
	benchKDAPrefill(b, func(g *conformance.GPU, a *wgsl.KDAArgs) error {
		return kdaSubmissions(g, a, g.D.KDARecurrent)
	})
}

// BenchmarkKDAChunkedPrefill measures the chunked kernels over the same
// pieces as BenchmarkKDARecurrentPrefill, in chunks of 16 and 32 tokens.
func BenchmarkKDAChunkedPrefill(b *testing.B) {
	for _, C := range []int{16, 32} {
		b.Run(fmt.Sprintf("C=%d", C), func(b *testing.B) {
			benchKDAPrefill(b, func(g *conformance.GPU, a *wgsl.KDAArgs) error {
				return kdaSubmissions(g, a, func(a *wgsl.KDAArgs) error { return g.D.KDAChunked(a, C) })
			})
		})
	}
}

// TestKDAChunkedRounds pins KDAChunked to KDARecurrent on the GPU when a
// piece's chunks do not fit one round of scratch (several intra/inter
// rounds, each continuing from the state the last wrote) and when the
// inter pass needs several dispatches.
func TestKDAChunkedRounds(t *testing.T) {
	g := conformance.NewGPU(t, device(t))
	defer g.Release()
	const T, H, dk = 200, 2, 128
	for _, round := range []int{1, 40000, 1 << 24} { // words: one chunk, two chunks, all 13 (inter: two dispatches)
		t.Run(fmt.Sprintf("round=%d", round), func(t *testing.T) {
			defer wgsl.SetKDAChunkRoundWordsForTest(round)()
			r := rand.New(rand.NewPCG(3, 4))
			a := kdaPrefillArgs(g, r, T, H, dk)
			r = rand.New(rand.NewPCG(3, 4))
			b := kdaPrefillArgs(g, r, T, H, dk)
			g.Check(g.D.KDARecurrent(a))
			g.Check(g.D.KDAChunked(b, 16))
			got := append(g.Read(b.O, T*H*dk), g.Read(b.S, H*dk*dk)...)
			want := append(g.Read(a.O, T*H*dk), g.Read(a.S, H*dk*dk)...)
			if e := conformance.NMSE(got, want); e > 1e-10 {
				t.Fatalf("chunked vs recurrent: NMSE %.3g", e)
			}
		})
	}
}
