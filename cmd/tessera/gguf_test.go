package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestGGUFInputEverywhere writes a random k3-nano as GGUF files (F32 via
// export, Q4_0 and MXFP4 via init-random --quant and quantize --type) and
// uses them where a model directory is accepted: inspect, logits, run,
// eval ppl and bench. The F32 GGUF's logits equal the directory's.
func TestGGUFInputEverywhere(t *testing.T) {
	tmp := t.TempDir()
	dir := filepath.Join(tmp, "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	f32 := filepath.Join(tmp, "m-f32.gguf")
	code, _, errs = tessera(t, "export", "--model", dir, "--out", f32, "--type", "f32")
	require.Zero(t, code, errs)
	q4 := filepath.Join(tmp, "m-q4_0.gguf")
	code, _, errs = tessera(t, "quantize", "--model", dir, "--type", "q4_0", "--out", q4)
	require.Zero(t, code, errs)
	mx := filepath.Join(tmp, "rand-mxfp4.gguf")
	code, out, errs := tessera(t, "init-random", "--config", "k3-nano", "--quant", "mxfp4", "--out", mx)
	require.Zero(t, code, errs)
	assert.Contains(t, out, "MXFP4")

	code, out, errs = tessera(t, "inspect", q4)
	require.Zero(t, code, errs)
	assert.Contains(t, out, "Q4_0")

	npy := func(model string) []float32 {
		p := filepath.Join(t.TempDir(), "l.npy")
		code, _, errs := tessera(t, "logits", "--model", model, "--tokens", "1,2,3,4", "--out", p)
		require.Zero(t, code, errs)
		x, _ := readNPY(t, p)
		return x
	}
	want, got := npy(dir), npy(f32)
	require.Len(t, got, len(want))
	for i := range want {
		require.InDelta(t, want[i], got[i], 1e-5, "logit %d", i)
	}
	npy(q4)

	code, _, errs = tessera(t, "run", "--model", mx, "--tokens", "1,2,3")
	require.Zero(t, code, errs)
	text := filepath.Join(tmp, "t.txt")
	require.NoError(t, os.WriteFile(text, []byte(strings.Repeat("gguf input for every command. ", 8)), 0o644))
	code, out, errs = tessera(t, "eval", "ppl", "--model", q4, "--file", text, "--ctx", "64")
	require.Zero(t, code, errs)
	assert.Contains(t, out, "perplexity")
	code, _, errs = tessera(t, "bench", "--model", mx, "--prompt-len", "8", "--gen", "2", "--repeats", "1")
	require.Zero(t, code, errs)
}

// TestGGUFBadInputOneLine: a truncated GGUF and a wrong --type fail with a
// non-zero exit and one line on stderr.
func TestGGUFBadInputOneLine(t *testing.T) {
	tmp := t.TempDir()
	p := filepath.Join(tmp, "m.gguf")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--quant", "q4_0", "--out", p)
	require.Zero(t, code, errs)
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	bad := filepath.Join(tmp, "trunc.gguf")
	require.NoError(t, os.WriteFile(bad, b[:len(b)-4096], 0o644))
	code, _, errs = tessera(t, "run", "--model", bad, "--tokens", "1,2")
	assert.NotZero(t, code)
	assert.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, errs)
	assert.Contains(t, errs, "tensor")
	code, _, errs = tessera(t, "quantize", "--model", tmp, "--type", "q3_k", "--out", filepath.Join(tmp, "x.gguf"))
	assert.NotZero(t, code)
	assert.Contains(t, errs, "q3_k")
}
