//go:build cgo && !js

package wgsl_test

import (
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// prefillCompare prefills prompt on the CPU and the GPU runner g in pieces
// of chunk tokens, comparing every piece's logits (all of them when every
// is true, else the last token's), then decodes steps greedy tokens
// comparing logits. It returns the worst relative error.
func prefillCompare(t *testing.T, m *model.Model, g *wgsl.Runner, prompt []int, chunk, steps int, every bool) float64 {
	t.Helper()
	V := m.Cfg.VocabSize
	cpu := model.NewRunner(m, model.Options{MaxChunk: chunk})
	defer cpu.Close()
	st := m.NewState()
	want, got := make([]float32, chunk*V), make([]float32, chunk*V)
	worst := 0.0
	for p0 := 0; p0 < len(prompt); p0 += chunk {
		piece := prompt[p0:min(p0+chunk, len(prompt))]
		n := V
		if every {
			n = len(piece) * V
		}
		if err := cpu.Forward(st, piece, want[:n]); err != nil {
			t.Fatal(err)
		}
		if err := g.Forward(piece, got[:n]); err != nil {
			t.Fatal(err)
		}
		if e := maxRelErr(got[:n], want[:n]); e > wholeModelTol {
			t.Fatalf("prefill piece at %d: max relative error %.3g > %g", p0, e, wholeModelTol)
		} else {
			worst = max(worst, e)
		}
		if !every && (p0/chunk)%32 == 31 {
			t.Logf("prefilled %d of %d tokens, worst max relative error so far %.2g", p0+len(piece), len(prompt), worst)
		}
	}
	next := generate.Argmax(want[(min(chunk, len(prompt)-(len(prompt)-1)/chunk*chunk)-1)*V:][:V])
	if !every {
		next = generate.Argmax(want[:V])
	}
	for step := 0; step < steps; step++ {
		if err := cpu.Forward(st, []int{next}, want[:V]); err != nil {
			t.Fatal(err)
		}
		if err := g.Forward([]int{next}, got[:V]); err != nil {
			t.Fatal(err)
		}
		if e := maxRelErr(got[:V], want[:V]); e > wholeModelTol {
			t.Fatalf("decode step %d at position %d: max relative error %.3g > %g", step, len(prompt)+step, e, wholeModelTol)
		} else {
			worst = max(worst, e)
		}
		next = generate.Argmax(want[:V])
	}
	return worst
}

// A real prefill across several latent-cache pages (pages of 128 rows,
// 300 prompt tokens in pieces of 64 that straddle page edges, then decode
// steps across the next edges) gives the CPU's logits; the cache's memory is
// the analytic figure (whole pages for exactly MaxContext rows).
func TestRunnerPagedCacheMatchesCPU(t *testing.T) {
	d := device(t)
	m := presetModel(t, "k3-nano", 5, "F32")
	prompt := make([]int, 300)
	for i := range prompt {
		prompt[i] = (i*131 + 7) % m.Cfg.VocabSize
	}
	const maxCtx = 384
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 64, MaxContext: maxCtx, CachePageRows: 128})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	st := model.ComputeStats(m.Cfg)
	analytic := st.KDAStateBytes + st.CacheBytesPerTok*maxCtx
	if got := g.StateBytes(); float64(got) > 1.1*float64(analytic) || got < st.CacheBytesPerTok*maxCtx {
		t.Errorf("state %d bytes, analytic %d", got, analytic)
	}
	t0 := time.Now()
	worst := prefillCompare(t, m, g, prompt, 64, 80, true)
	t.Logf("300-token prefill + 80 decode steps over 3 pages of 128 rows: worst max relative error %.2g (%v)", worst, time.Since(t0).Round(time.Millisecond))
}

// Decoding after FillContext (synthetic cache rows, the ctx-sweep path) over
// a paged cache gives the logits of the CPU model whose caches hold the
// same rows.
func TestRunnerFillContextMatchesCPU(t *testing.T) {
	d := device(t)
	m := presetModel(t, "k3-nano", 6, "F32")
	const L = 700
	row := func(layer, i int, dst []float32) {
		for j := range dst {
			dst[j] = float32((i*31+j*17+layer*5)%97)/97 - 0.5
		}
	}
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: 8, MaxContext: L + 16, CachePageRows: 256})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if err := g.FillContext(L, row); err != nil {
		t.Fatal(err)
	}
	if g.Pos() != L {
		t.Fatalf("Pos %d after FillContext(%d)", g.Pos(), L)
	}
	cpu := model.NewRunner(m, model.Options{MaxChunk: 8})
	defer cpu.Close()
	st := m.NewState()
	for li, c := range st.Caches {
		if c == nil {
			continue
		}
		r := make([]float32, c.Width())
		for i := 0; i < L; i++ {
			row(li, i, r)
			c.Append(r)
		}
	}
	st.N = L
	V := m.Cfg.VocabSize
	want, got := make([]float32, V), make([]float32, V)
	tok := 3
	for step := 0; step < 12; step++ {
		if err := cpu.Forward(st, []int{tok}, want); err != nil {
			t.Fatal(err)
		}
		if err := g.Forward([]int{tok}, got); err != nil {
			t.Fatal(err)
		}
		if e := maxRelErr(got, want); e > wholeModelTol {
			t.Fatalf("decode step %d after %d synthetic rows: max relative error %.3g > %g", step, L, e, wholeModelTol)
		}
		tok = generate.Argmax(want)
	}
	if err := g.FillContext(L+17, row); err == nil {
		t.Errorf("FillContext beyond MaxContext succeeded")
	}
}

// TESSERA_LONG_PREFILL=N (e.g. 32768; scripts/gpu-long-context.sh) runs a
// real N-token prefill of k3-nano on the GPU with cache pages of 4,096 rows
// and compares the last token's logits of every piece, and 8 decode steps,
// with the CPU. It takes minutes on lavapipe, so it is not part of make test.
func TestRunnerLongPrefillMatchesCPU(t *testing.T) {
	v := os.Getenv("TESSERA_LONG_PREFILL")
	if v == "" {
		t.Skip("set TESSERA_LONG_PREFILL=N (e.g. 32768) to run an N-token prefill on the GPU against the CPU")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		t.Fatalf("TESSERA_LONG_PREFILL=%q: want a token count", v)
	}
	d := device(t)
	m := presetModel(t, "k3-nano", 7, "F32")
	prompt := make([]int, n)
	for i := range prompt {
		prompt[i] = (i*7919 + 1) % m.Cfg.VocabSize
	}
	chunk := 256
	// pages of 4,096 rows, so a 32 K-token prefill crosses seven page edges
	g, err := wgsl.NewRunner(d, m, wgsl.RunnerOptions{MaxChunk: chunk, MaxContext: n + 16, CachePageRows: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	t0 := time.Now()
	worst := prefillCompare(t, m, g, prompt, chunk, 8, false)
	t.Logf("%d-token prefill (pieces of %d) + 8 decode steps: worst max relative error %.2g (%v)", n, chunk, worst, time.Since(t0).Round(time.Second))
}
