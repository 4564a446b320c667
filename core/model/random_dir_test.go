package model

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/models/presets"
)

// WriteRandomDir's directory loads with OpenDir, keeps the layout and
// holds RandomTensors' values.
func TestWriteRandomDir(t *testing.T) {
	raw, err := presets.Read("k3-nano")
	require.NoError(t, err)
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	cfg.Layout = config.LayoutKimiK3
	dir := t.TempDir()
	require.NoError(t, WriteRandomDir(dir, cfg, 7, "F32"))
	m, ck, err := OpenDir(dir)
	require.NoError(t, err)
	defer ck.Close()
	require.Equal(t, config.LayoutKimiK3, m.Cfg.Layout)
	for _, w := range RandomTensors(cfg, 7, "F32") {
		if w.Name == "language_model.model.norm.weight" {
			require.Equal(t, w.Data, m.Norm)
			return
		}
	}
	t.Fatal("no final norm among RandomTensors")
}
