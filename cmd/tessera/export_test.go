package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/gguf"
)

func TestExportCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nano")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	out := filepath.Join(t.TempDir(), "nano.gguf")
	code, stdout, errs := tessera(t, "export", "--model", dir, "--format", "gguf", "--type", "q8_0", "--out", out)
	require.Zero(t, code, errs)
	assert.Contains(t, stdout, "kimi-k3, 107 tensors")
	assert.Contains(t, stdout, "(q8_0)")
	f, err := gguf.Open(out)
	require.NoError(t, err)
	defer f.Close()
	v, _ := f.Get("general.file_type")
	assert.Equal(t, uint32(7), v)
	v, _ = f.Get("general.name")
	assert.Equal(t, "nano", v)

	lin := filepath.Join(t.TempDir(), "lin")
	code, _, errs = tessera(t, "init-random", "--config", "kimi-linear-nano", "--out", lin)
	require.Zero(t, code, errs)
	code, stdout, errs = tessera(t, "export", "--model", lin, "--out", filepath.Join(t.TempDir(), "l.gguf"), "--type", "F32", "--name", "kl")
	require.Zero(t, code, errs)
	assert.Contains(t, stdout, "kimi-linear")
}

func TestExportCommandBadInput(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nano")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	outDir := t.TempDir()
	out := filepath.Join(outDir, "x.gguf")
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"--model", dir}, 2, "need --model and --out"},
		{[]string{"--model", dir, "--out", out, "--type", "q5_k"}, 1, `type "q5_k": want f32, f16, bf16, q8_0, q4_0, q4_k or mxfp4`},
		{[]string{"--model", dir, "--out", out, "--format", "onnx"}, 1, `--format "onnx": only gguf is supported`},
		{[]string{"--model", filepath.Join(dir, "missing"), "--out", out}, 1, "config.json"},
		{[]string{"--model", dir, "--out", outDir}, 1, "is a directory"},
		{[]string{"--model", dir, "--out", filepath.Join(outDir, "no", "x.gguf")}, 1, "output directory " + filepath.Join(outDir, "no") + " does not exist"},
	}
	for _, c := range cases {
		code, stdout, errs := tessera(t, append([]string{"export"}, c.args...)...)
		assert.Equal(t, c.code, code, "%v: %s", c.args, errs)
		assert.Empty(t, stdout, "%v", c.args)
		if c.code == 1 {
			msg := strings.TrimSpace(errs)
			assert.Equal(t, 1, strings.Count(msg, "\n")+1, "one line: %s", msg)
			assert.True(t, strings.HasPrefix(msg, "tessera export: "), msg)
		}
		assert.Contains(t, errs, c.want, "%v", c.args)
	}
	ents, err := os.ReadDir(outDir)
	require.NoError(t, err)
	assert.Empty(t, ents, "nothing written by failed exports")
}
