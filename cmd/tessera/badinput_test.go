package main

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// badInputs writes one model directory per class of bad input, each a
// copy of a valid random k3-nano with one thing broken.
func badInputs(t *testing.T, good string) map[string]string {
	root := t.TempDir()
	read := func(n string) []byte {
		b, err := os.ReadFile(filepath.Join(good, n))
		require.NoError(t, err)
		return b
	}
	cfg, st := read("config.json"), read("model.safetensors")
	hdrLen := binary.LittleEndian.Uint64(st[:8])
	cases := map[string]map[string][]byte{
		"truncated-weights":   {"model.safetensors": st[:len(st)/3]},
		"tiny-weights":        {"model.safetensors": st[:5]},
		"header-beyond-file":  {"model.safetensors": append(binary.LittleEndian.AppendUint64(nil, uint64(len(st))*4), st[8:]...)},
		"header-not-json":     {"model.safetensors": append(append(binary.LittleEndian.AppendUint64(nil, 4), []byte("{{{{")...), st[8+hdrLen:]...)},
		"config-not-json":     {"config.json": []byte("{\"model_type\": ")},
		"config-unknown-type": {"config.json": bytes.Replace(cfg, []byte(`"kimi_k3"`), []byte(`"llama"`), 1)},
		"config-bad-dims":     {"config.json": bytes.Replace(cfg, []byte(`"hidden_size": 64`), []byte(`"hidden_size": -64`), 1)},
		"config-shape-clash":  {"config.json": bytes.Replace(cfg, []byte(`"hidden_size": 64`), []byte(`"hidden_size": 96`), 1)},
		"no-weights":          {"model.safetensors": nil},
		"index-missing-shard": {"model.safetensors.index.json": []byte(`{"metadata":{},"weight_map":{"language_model.lm_head.weight":"model-00001-of-00002.safetensors"}}`)},
		"index-not-json":      {"model.safetensors.index.json": []byte(`{"weight_map": [`)},
	}
	dirs := map[string]string{}
	for name, files := range cases {
		d := filepath.Join(root, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, changed := files[f]
			if !changed {
				b = read(f)
			}
			if b != nil {
				require.NoError(t, os.WriteFile(filepath.Join(d, f), b, 0o644))
			}
		}
		for f, b := range files {
			if f != "config.json" && f != "model.safetensors" {
				require.NoError(t, os.WriteFile(filepath.Join(d, f), b, 0o644))
			}
		}
		dirs[name] = d
	}
	return dirs
}

// Every bad input makes every model-reading command exit 1 with exactly one
// clear line on stderr: no panic, no stack trace.
func TestBadInputsFailCleanly(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tessera")
	build := exec.Command("go", "build", "-o", bin, ".")
	out, err := build.CombinedOutput()
	require.NoError(t, err, string(out))
	good := filepath.Join(t.TempDir(), "good")
	require.NoError(t, exec.Command(bin, "init-random", "--config", "k3-nano", "--layout", "kimi_k3", "--out", good).Run())
	npy := filepath.Join(t.TempDir(), "x.npy")
	for name, dir := range badInputs(t, good) {
		for _, args := range [][]string{
			{"inspect", dir},
			{"run", "--model", dir, "--tokens", "1,2"},
			{"logits", "--model", dir, "--tokens", "1,2", "--out", npy},
			{"bench", "--model", dir, "--gen", "1", "--repeats", "1"},
			{"export", "--model", dir, "--out", filepath.Join(t.TempDir(), "x.gguf")},
		} {
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "%s %v: want a non-zero exit, got %v", name, args[0], err)
			require.Equal(t, 1, ee.ExitCode(), "%s %v", name, args[0])
			msg := strings.TrimSpace(stderr.String())
			msg = strings.TrimPrefix(msg, "bench: measuring memory bandwidth...\n")
			require.NotContains(t, msg, "panic", "%s %v", name, args[0])
			require.NotContains(t, msg, "goroutine", "%s %v", name, args[0])
			require.Equal(t, 1, strings.Count(msg, "\n")+1, "%s %v: one line, got:\n%s", name, args[0], msg)
			require.True(t, strings.HasPrefix(msg, "tessera "+args[0]+": "), "%s: %s", name, msg)
		}
	}
}
