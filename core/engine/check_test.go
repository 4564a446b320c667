package engine

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// TestCheck: a model directory and a GGUF file are checked from their
// headers — the GGUF file read no further than its header's last read
// window — with the figures the loaded engine has, and a model without
// config.json is refused saying so.
func TestCheck(t *testing.T) {
	files := nanoFiles(t)
	cfg, n, err := Check(safetensors.MemOpener(files))
	require.NoError(t, err)
	e, err := Load(safetensors.MemOpener(files))
	require.NoError(t, err)
	defer e.Close()
	assert.Equal(t, e.Cfg.HiddenSize, cfg.HiddenSize)
	assert.Equal(t, e.weightSize, n.Weights)
	assert.Equal(t, model.ComputeStats(cfg).DecodeReadParams*4, n.DecodeBytes())

	_, data := microGGUF(t, "q8_0")
	src := safetensors.NewRecorder(safetensors.BytesSource(data))
	gcfg, gn, err := CheckGGUF(src)
	require.NoError(t, err)
	ge, err := LoadGGUF(safetensors.BytesSource(data), false)
	require.NoError(t, err)
	defer ge.Close()
	assert.Equal(t, ge.Cfg.NumHiddenLayers, gcfg.NumHiddenLayers)
	assert.Equal(t, ge.weightSize, gn.Weights)
	assert.Greater(t, gn.Decode[tensor.Q8_0], gn.DecodeBytes()/2, "Q8_0 carries most of a token's reads")
	first := int64(len(data))
	for _, name := range ge.ck.Names() {
		if tn, _ := ge.ck.Tensor(name); tn.Shard == "model.gguf" {
			first = min(first, tn.Offset)
		}
	}
	// the parser reads in windows of 64 KiB: one may reach past the header
	var end int64
	for _, r := range src.Ranges() {
		end = max(end, r.Off+r.N)
	}
	assert.LessOrEqual(t, end, first+64<<10, "read past the header")

	// the same model in shards (model.safetensors.index.json): the same figures
	dir := t.TempDir()
	ts, err := model.RandomCheckpoint(cfg, 1, "F32")
	require.NoError(t, err)
	require.NoError(t, safetensors.WriteDir(dir, ts, nil, 256<<10))
	require.NoError(t, os.WriteFile(filepath.Join(dir, ConfigFile), files[ConfigFile], 0o644))
	shards, err := filepath.Glob(filepath.Join(dir, "*.safetensors"))
	require.NoError(t, err)
	require.Greater(t, len(shards), 2, "not sharded: the case proves nothing")
	_, sn, err := Check(safetensors.DirOpener(dir))
	require.NoError(t, err)
	assert.Equal(t, n, sn)

	delete(files, ConfigFile)
	_, _, err = Check(safetensors.MemOpener(files))
	require.ErrorContains(t, err, "model has no config.json")
}
