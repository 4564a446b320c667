package main

import (
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestFamilyCommands: the qwen3_next and deepseek_v3 presets go through
// init-random (Hugging Face layout), inspect, logits (chunked prefill
// equals one piece), run and GGUF export; what they do not support is
// refused by name.
func TestFamilyCommands(t *testing.T) {
	for _, c := range []struct{ preset, summary, mixer, cache string }{
		{"qwen3-next-nano", "qwen3_next d=64 L=4 [GDN GDN GDN GQA]", "GDN          2 key / 4 value heads", "K/V cache"},
		{"deepseek-v3-nano", "deepseek_v3 d=64 L=4 [MLA MLA MLA MLA]", "YaRN ×4 of 1024", "MLA cache"},
	} {
		t.Run(c.preset, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), c.preset)
			code, out, errs := tessera(t, "init-random", "--config", c.preset, "--out", dir, "--dtype", "bf16")
			require.Zero(t, code, errs)
			require.Contains(t, out, c.summary)

			code, out, errs = tessera(t, "inspect", dir)
			require.Zero(t, code, errs)
			require.Contains(t, out, c.mixer)
			require.Contains(t, out, c.cache)

			npy := filepath.Join(dir, "l.npy")
			code, _, errs = tessera(t, "logits", "--model", dir, "--tokens", "1,2,3,4,5,6,7", "--out", npy)
			require.Zero(t, code, errs)
			full, hdr := readNPY(t, npy)
			require.Contains(t, hdr, "'shape': (7, 512)")
			code, _, errs = tessera(t, "logits", "--model", dir, "--tokens", "1,2,3,4,5,6,7", "--out", npy, "--chunk", "3")
			require.Zero(t, code, errs)
			chunked, _ := readNPY(t, npy)
			for i := range full {
				require.InDelta(t, full[i], chunked[i], 1e-4)
			}

			code, out, errs = tessera(t, "run", "--model", dir, "--tokens", "1,2,3", "--ids", "--max-tokens", "4")
			require.Zero(t, code, errs)
			require.Len(t, splitLines(out), 4)

			code, out, errs = tessera(t, "export", "--model", dir, "--format", "gguf", "--type", "q8_0", "--out", filepath.Join(dir, "m.gguf"))
			require.Zero(t, code, errs)
			require.Contains(t, out, map[string]string{"qwen3-next-nano": "qwen3next", "deepseek-v3-nano": "deepseek2"}[c.preset])

			code, _, errs = tessera(t, "init-random", "--config", c.preset, "--layout", "kimi_k3", "--out", dir+"-k3")
			require.Equal(t, 2, code)
			require.Contains(t, errs, "is written in its own Hugging Face layout")
			code, _, errs = tessera(t, "quantize", "--model", dir, "--out", dir+"-q8")
			require.Equal(t, 1, code)
			require.Contains(t, errs, "Kimi family only")
		})
	}
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i, c := range s {
		if c == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return out
}
