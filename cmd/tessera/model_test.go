package main

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func tessera(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := runMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

// readNPY parses a float32 2-D .npy file.
func readNPY(t *testing.T, path string) ([]float32, string) {
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "\x93NUMPY\x01\x00", string(b[:8]))
	n := int(binary.LittleEndian.Uint16(b[8:10]))
	hdr := string(b[10 : 10+n])
	require.Zero(t, (10+n)%64, "header is 64-byte aligned")
	data := b[10+n:]
	out := make([]float32, len(data)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(data[4*i:]))
	}
	return out, hdr
}

func TestCLIEndToEnd(t *testing.T) {
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		for _, layout := range []string{"kimi_linear", "kimi_k3"} {
			dir := filepath.Join(t.TempDir(), preset)
			code, out, errs := tessera(t, "init-random", "--config", preset, "--seed", "1", "--layout", layout, "--dtype", "bf16", "--out", dir)
			require.Zero(t, code, errs)
			require.Contains(t, out, "layout "+layout)

			code, out, errs = tessera(t, "inspect", dir)
			require.Zero(t, code, errs)
			for _, want := range []string{"parameters", "KDA state", "MLA cache", "memory @1M"} {
				require.Contains(t, out, want)
			}

			npy := filepath.Join(dir, "l.npy")
			code, _, errs = tessera(t, "logits", "--model", dir, "--tokens", "1,2,3,4,5", "--out", npy)
			require.Zero(t, code, errs)
			full, hdr := readNPY(t, npy)
			require.Contains(t, hdr, "'shape': (5, 512)")
			require.Contains(t, hdr, "'descr': '<f4'")
			require.Len(t, full, 5*512)
			// Chunking the prefill does not change the logits.
			code, _, errs = tessera(t, "logits", "--model", dir, "--tokens", "1,2,3,4,5", "--out", npy, "--chunk", "2")
			require.Zero(t, code, errs)
			chunked, _ := readNPY(t, npy)
			for i := range full {
				require.InDelta(t, full[i], chunked[i], 1e-4*(1+math.Abs(float64(full[i]))))
			}

			code, out, errs = tessera(t, "run", "--model", dir, "--tokens", "1,2,3", "--max-tokens", "5", "--ids")
			require.Zero(t, code, errs)
			require.Len(t, strings.Fields(out), 5)
			code, _, errs = tessera(t, "run", "--model", dir, "--prompt", "hi", "--max-tokens", "3", "--temperature", "0.7", "--top-p", "0.9")
			require.Zero(t, code, errs)
		}
	}
}

func TestCLIErrors(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, _, _ := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"nope"}, 2, `unknown command "nope"`},
		{[]string{"run", "--model", dir}, 2, "exactly one of --prompt or --tokens"},
		{[]string{"run", "--model", dir, "--tokens", "1,x"}, 1, `entry 1 "x" is not an integer`},
		{[]string{"run", "--model", dir, "--tokens", "1,600"}, 1, "token 600 (index 1) is outside the vocabulary"},
		{[]string{"run", "--model", dir, "--tokens", "1", "--top-p", "3"}, 1, "top-p must be in [0, 1]"},
		{[]string{"run", "--model", dir, "--tokens", "1", "--backend", "tpu"}, 1, `--backend "tpu"`},
		{[]string{"run", "--model", dir, "--tokens", "1", "--logit-bias", "7=3"}, 1, `--logit-bias: "7=3" is not ID:BIAS`},
		{[]string{"run", "--model", dir, "--tokens", "1", "--logit-bias", "7:3,9:-101"}, 1, "logit bias of token 9 must be in [-100, 100]"},
		{[]string{"run", "--model", dir, "--tokens", "1", "--logit-bias", "512:1"}, 1, "logit bias: token 512 is outside the vocabulary [0, 512)"},
		{[]string{"logits", "--model", filepath.Join(dir, "missing"), "--tokens", "1", "--out", "x.npy"}, 1, "config.json"},
		{[]string{"init-random", "--config", "k9-giga", "--out", dir}, 1, `config "k9-giga" is neither a preset`},
		{[]string{"init-random", "--config", "k3-nano", "--out", dir, "--dtype", "f8"}, 1, `--dtype "f8"`},
		{[]string{"inspect"}, 2, "need exactly one model directory"},
		{[]string{"inspect", "--ctx", "0", dir}, 2, "--ctx 0: want a positive number of tokens"},
		{[]string{"inspect", "--speed", "--ctx", "1000", dir}, 0, "tok/s at a 1000-token context on this CPU"},
		{[]string{"run", "--help"}, 0, "usage: tessera run"},
	}
	for _, c := range cases {
		code, out, errs := tessera(t, c.args...)
		require.Equal(t, c.code, code, "%v: %s", c.args, errs)
		require.Contains(t, out+errs, c.want, "%v", c.args)
	}
	// A truncated checkpoint is reported with the file and offsets, no panic.
	p := filepath.Join(dir, "model.safetensors")
	b, err := os.ReadFile(p)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, b[:len(b)/2], 0o644))
	code, _, errs := tessera(t, "inspect", dir)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "model.safetensors")
}

func TestCLIImages(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "v")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano-vision", "--out", dir)
	require.Zero(t, code, errs)
	code, out, errs := tessera(t, "inspect", dir)
	require.Zero(t, code, errs)
	require.Contains(t, out, "vision       2 layers × 64")
	img := func(n string) string { return filepath.Join("..", "..", "testdata", "images", n) }
	args := []string{"run", "--model", dir, "--prompt", "what is it", "--max-tokens", "4", "--ids",
		"--image", img("quadrants.jpg"), "--image", img("alpha.png")}
	code, a, errs := tessera(t, args...)
	require.Zero(t, code, errs)
	require.Len(t, strings.Fields(a), 4)
	code, b, _ := tessera(t, args...)
	require.Zero(t, code)
	require.Equal(t, a, b, "deterministic")
	// The image changes the output.
	code, c, _ := tessera(t, "run", "--model", dir, "--prompt", "what is it", "--max-tokens", "4", "--ids", "--image", img("gray.png"), "--image", img("alpha.png"))
	require.Zero(t, code)
	require.NotEqual(t, a, c)

	code, _, errs = tessera(t, "run", "--model", dir, "--prompt", "x", "--image", img("missing.png"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "missing.png")
	bad := filepath.Join(t.TempDir(), "bad.png")
	require.NoError(t, os.WriteFile(bad, []byte("\x89PNG\r\n\x1a\nnot really"), 0o644))
	code, _, errs = tessera(t, "run", "--model", dir, "--prompt", "x", "--image", bad)
	require.Equal(t, 1, code)
	require.Contains(t, errs, "image 1")
}

// TestEveryHelpExitsZero asks every registered subcommand (and eval's two
// subcommands) for --help and -h: each must print its usage and exit 0,
// never run. A new subcommand is covered by registering it.
func TestEveryHelpExitsZero(t *testing.T) {
	var argvs [][]string
	for name := range commands {
		argvs = append(argvs, []string{name, "--help"}, []string{name, "-h"})
	}
	argvs = append(argvs,
		[]string{"eval", "ppl", "--help"}, []string{"eval", "caption", "--help"},
		[]string{"eval", "help"}, []string{"help"}, []string{"--help"})
	require.Greater(t, len(commands), 10, "the commands registered themselves")
	for _, args := range argvs {
		code, out, errs := tessera(t, args...)
		require.Equal(t, 0, code, "%v exited %d: %s", args, code, errs)
		require.Contains(t, out+errs, "usage: tessera", "%v printed no usage", args)
	}
	// Not a help request: still a usage error.
	for _, args := range [][]string{{"eval"}, {"eval", "bleu"}, {"eval", "--model", "x"}} {
		code, _, errs := tessera(t, args...)
		require.Equal(t, 2, code, "%v: %s", args, errs)
	}
}
