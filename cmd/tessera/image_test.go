package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/generate"
)

func testImage(n string) string { return filepath.Join("..", "..", "testdata", "images", n) }

// relErr32 is max|a − b| / max|b|.
func relErr32(a, b []float32) float64 {
	var num, den float64
	for i := range b {
		num = max(num, abs64(float64(a[i]-b[i])))
		den = max(den, abs64(float64(b[i])))
	}
	return num / max(den, 1e-30)
}

// tessera logits --image assembles the prompt like run --image: its last
// row's argmax is run's first greedy token, and the image changes T.
func TestCLILogitsImage(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano-vision", "--seed", "5", "--out", dir)
	require.Zero(t, code, errs)
	args := []string{"--model", dir, "--tokens", "5,6,7", "--image", testImage("quadrants.jpg"), "--image", testImage("gray.png")}
	p := filepath.Join(dir, "mm.npy")
	code, _, errs = tessera(t, append([]string{"logits", "--out", p, "--chunk", "5"}, args...)...)
	require.Zero(t, code, errs)
	v, hdr := readNPY(t, p)
	V := 512
	T := len(v) / V
	require.Greater(t, T, 3+2, "image tokens are counted: %s", hdr)
	require.Contains(t, hdr, "("+strconv.Itoa(T)+", 512)")
	code, out, errs := tessera(t, append([]string{"run", "--max-tokens", "1", "--ids"}, args...)...)
	require.Zero(t, code, errs)
	require.Equal(t, strconv.Itoa(generate.Argmax(v[(T-1)*V:])), strings.TrimSpace(out))

	// Without images the same tokens give 3 rows that differ from the image rows.
	code, _, errs = tessera(t, "logits", "--model", dir, "--tokens", "5,6,7", "--out", p)
	require.Zero(t, code, errs)
	w, _ := readNPY(t, p)
	require.Len(t, w, 3*V)

	// Errors name the problem.
	code, _, errs = tessera(t, "logits", "--model", dir, "--tokens", "5", "--out", p, "--image", testImage("missing.png"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "missing.png")
	plain := filepath.Join(t.TempDir(), "plain")
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--out", plain)
	require.Zero(t, code, errs)
	code, _, errs = tessera(t, "logits", "--model", plain, "--tokens", "5", "--out", p, "--image", testImage("gray.png"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "no vision tower")
}

// run --image and logits --image give the same greedy ids and logits
// (max relative error ≤ 1e-4) on --backend gpu as on --backend cpu.
func TestCLIImageGPUMatchesCPU(t *testing.T) {
	requireGPU(t)
	dir := filepath.Join(t.TempDir(), "v")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano-vision", "--seed", "7", "--out", dir)
	require.Zero(t, code, errs)
	imgs := []string{"--image", testImage("quadrants-exif6.jpg"), "--image", testImage("alpha.png")}
	run := func(backend string) string {
		code, out, errs := tessera(t, append([]string{"run", "--model", dir, "--tokens", "5,6,7", "--max-tokens", "16",
			"--ids", "--chunk", "8", "--backend", backend}, imgs...)...)
		require.Zero(t, code, errs)
		return out
	}
	cpu := run("cpu")
	require.Len(t, strings.Fields(cpu), 16)
	require.Equal(t, cpu, run("gpu"))
	npy := func(backend string) []float32 {
		p := filepath.Join(dir, backend+".npy")
		code, _, errs := tessera(t, append([]string{"logits", "--model", dir, "--tokens", "5,6,7", "--out", p,
			"--chunk", "8", "--backend", backend}, imgs...)...)
		require.Zero(t, code, errs)
		v, _ := readNPY(t, p)
		return v
	}
	c, g := npy("cpu"), npy("gpu")
	require.Len(t, g, len(c))
	e := relErr32(g, c)
	require.Less(t, e, 1e-4)
	t.Logf("%d logits rows, max relative error %.2g; greedy ids equal", len(c)/512, e)
}
