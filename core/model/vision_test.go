package model

import (
	"bytes"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
	"github.com/tessera-llm/tessera/models/presets"
)

// recordedVision is a random k3-nano-vision checkpoint (kimi_k3 layout)
// read through a Recorder.
func recordedVision(t *testing.T) (*config.Config, *safetensors.Checkpoint, *safetensors.Recorder) {
	t.Helper()
	raw, err := presets.Read("k3-nano-vision")
	require.NoError(t, err)
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	cfg.Layout = config.LayoutKimiK3
	ts, err := RandomCheckpoint(cfg, 1, safetensors.BF16)
	require.NoError(t, err)
	ck, rec, err := safetensors.RecordTensors(ts)
	require.NoError(t, err)
	return cfg, ck, rec
}

// visionReads are the reads that touched a vision tensor's data.
func visionReads(ck *safetensors.Checkpoint, rec *safetensors.Recorder) map[string][]safetensors.Range {
	out := map[string][]safetensors.Range{}
	for _, n := range ck.Names() {
		tt, _ := ck.Tensor(n)
		if r := rec.Overlaps(tt); vision.IsVisionTensor(n) && len(r) > 0 {
			out[n] = r
		}
	}
	return out
}

// TestVisionTowerLazy: Load and LoadDeferred read none of the vision
// tensors' data; the first VisionTower call reads every one of them and
// binds the tower Load would, concurrent callers get the same tower, and
// later calls read nothing.
func TestVisionTowerLazy(t *testing.T) {
	for _, deferred := range []bool{false, true} {
		t.Run(map[bool]string{false: "Load", true: "LoadDeferred"}[deferred], func(t *testing.T) {
			cfg, ck, rec := recordedVision(t)
			defer ck.Close()
			ld := Load
			if deferred {
				ld = LoadDeferred
			}
			m, err := ld(cfg, ck)
			require.NoError(t, err)
			require.True(t, m.HasVision())
			require.NotNil(t, m.VisionCfg)
			require.Empty(t, visionReads(ck, rec), "load read vision tensors")

			towers, errs := make([]*vision.Tower, 8), make([]error, 8)
			var wg sync.WaitGroup
			for i := range towers {
				wg.Go(func() { towers[i], errs[i] = m.VisionTower() })
			}
			wg.Wait()
			for i, tw := range towers {
				require.NoError(t, errs[i])
				require.Same(t, towers[0], tw)
			}
			read := visionReads(ck, rec)
			for _, s := range vision.Spec(m.VisionCfg) {
				require.Contains(t, read, s.Name, "the first use did not read it")
			}
			want, err := vision.Load(m.VisionCfg, ck)
			require.NoError(t, err)
			require.Equal(t, want, towers[0], "the lazy tower differs from an eager vision.Load")

			n := len(rec.Ranges())
			tw, err := m.VisionTower()
			require.NoError(t, err)
			require.Same(t, towers[0], tw)
			require.Len(t, rec.Ranges(), n, "a second use read the checkpoint")
		})
	}
}

// TestVisionTowerErrors: a text-only model has no tower; a tower whose
// checkpoint is gone before its first use fails, with the same error on
// every call.
func TestVisionTowerErrors(t *testing.T) {
	m := randomModel(t, "k3-nano", config.LayoutKimiLinear, safetensors.F32, 1)
	require.False(t, m.HasVision())
	_, err := m.VisionTower()
	require.ErrorContains(t, err, "no vision tower")

	cfg, ck, _ := recordedVision(t)
	m, err = Load(cfg, ck)
	require.NoError(t, err)
	require.NoError(t, ck.Close())
	_, err = m.VisionTower()
	require.ErrorContains(t, err, "reading the vision tower: ")
	require.ErrorContains(t, err, "checkpoint is closed")
	_, again := m.VisionTower()
	require.Same(t, err, again)
}

// TestVisionLoadErrors: a vision checkpoint that is missing a tensor, has
// one mis-shaped, of a bad dtype or unused fails at Load, naming it,
// before any image.
func TestVisionLoadErrors(t *testing.T) {
	raw, err := presets.Read("k3-nano-vision")
	require.NoError(t, err)
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	cfg.Layout = config.LayoutKimiK3
	ts, err := RandomCheckpoint(cfg, 1, safetensors.F32)
	require.NoError(t, err)
	vi := -1
	for i, w := range ts {
		if w.Name == "vision_tower.encoder.blocks.0.wqkv.weight" {
			vi = i
		}
	}
	require.GreaterOrEqual(t, vi, 0)
	name := ts[vi].Name
	edit := func(f func([]safetensors.WriteTensor) []safetensors.WriteTensor) []safetensors.WriteTensor {
		return f(append([]safetensors.WriteTensor(nil), ts...))
	}
	for _, tc := range []struct {
		name string
		ts   []safetensors.WriteTensor
		want string
	}{
		{"missing", edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return append(ts[:vi], ts[vi+1:]...) }),
			"tensor " + name + ": missing from checkpoint"},
		{"mis-shaped", edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			ts[vi] = safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: []int{2, 3}, Data: make([]float32, 6)}
			return ts
		}), "tensor " + name + ": expected shape"},
		{"bad dtype", edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			ts[vi].DType, ts[vi].Data = safetensors.U8, make([]float32, len(ts[vi].Data))
			return ts
		}), "tensor " + name + ": dtype U8 is not supported"},
		{"unused", edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			return append(ts, safetensors.WriteTensor{Name: "mm_projector.extra.weight", DType: safetensors.F32, Shape: []int{1}, Data: []float32{1}})
		}), "vision tensors the vision_config does not use: mm_projector.extra.weight"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var buf bytes.Buffer
			require.NoError(t, safetensors.Write(&buf, tc.ts, nil))
			ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{safetensors.SingleFileName: buf.Bytes()}))
			require.NoError(t, err)
			defer ck.Close()
			for _, ld := range []func(*config.Config, *safetensors.Checkpoint) (*Model, error){Load, LoadDeferred} {
				_, err := ld(cfg, ck)
				require.ErrorContains(t, err, tc.want)
			}
		})
	}
}
