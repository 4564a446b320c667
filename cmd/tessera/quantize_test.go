package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestQuantize(t *testing.T) {
	base := t.TempDir()
	f, q, r := filepath.Join(base, "f"), filepath.Join(base, "q"), filepath.Join(base, "r")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "2", "--out", f)
	require.Zero(t, code, errs)
	code, out, errs := tessera(t, "quantize", "--model", f, "--out", q)
	require.Zero(t, code, errs)
	require.Contains(t, out, "(q8)")
	code, out, errs = tessera(t, "inspect", q)
	require.Zero(t, code, errs)
	require.Contains(t, out, "I8:")
	// init-random --quant q8 writes the same checkpoint.
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--seed", "2", "--quant", "q8", "--out", r)
	require.Zero(t, code, errs)
	run := func(dir, backend string) string {
		code, out, errs := tessera(t, "run", "--model", dir, "--tokens", "1,2,3,4", "--max-tokens", "8", "--ids", "--backend", backend)
		require.Zero(t, code, errs)
		return out
	}
	require.Equal(t, run(q, "cpu"), run(r, "cpu"))
	require.Len(t, strings.Fields(run(q, "cpu")), 8)
	code, _, errs = tessera(t, "quantize", "--model", q, "--out", filepath.Join(base, "qq"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "already quantized")
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--quant", "q4", "--out", r)
	require.Equal(t, 1, code)
	require.Contains(t, errs, `--quant "q4"`)
}

// Q8 weights run on the GPU backend too (widened to f16 on upload) with the
// CPU's greedy tokens.
func TestQuantizeGPU(t *testing.T) {
	requireGPU(t)
	dir := filepath.Join(t.TempDir(), "q")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "3", "--quant", "q8", "--out", dir)
	require.Zero(t, code, errs)
	run := func(backend string) string {
		code, out, errs := tessera(t, "run", "--model", dir, "--tokens", "5,6,7,8", "--max-tokens", "10", "--ids", "--backend", backend)
		require.Zero(t, code, errs)
		return out
	}
	require.Equal(t, run("cpu"), run("gpu"))
}
