package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestBenchJSONAndCharts(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	js, plots := filepath.Join(t.TempDir(), "b.json"), t.TempDir()
	code, out, errs := tessera(t, "bench", "--model", dir, "--prompt-len", "16", "--gen", "4", "--repeats", "1",
		"--ctx-sweep", "1k,4k", "--json", js, "--plot", plots)
	require.Zero(t, code, errs)
	require.Contains(t, out, "roofline ratio")
	require.Contains(t, out, "decode by op")
	var res benchResult
	b, err := os.ReadFile(js)
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(b, &res))
	require.Greater(t, res.DecodeTokPerS, 0.0)
	require.Greater(t, res.MachineGBPerS, 0.0)
	require.Contains(t, res.DecodeOps, "KDA")
	require.Len(t, res.Sweep, 2)
	// The measured state follows the analytic figure (KDA state + cache/token).
	for _, p := range res.Sweep {
		ratio := float64(p.StateBytes) / float64(p.Analytic)
		require.InDelta(t, 1, ratio, 0.3, "context %d", p.Context)
	}
	for _, f := range []string{"decode-ops.png", "ctx-sweep.png"} {
		st, err := os.Stat(filepath.Join(plots, f))
		require.NoError(t, err)
		require.Greater(t, st.Size(), int64(1000))
	}
}
