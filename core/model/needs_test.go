package model

import (
	"cmp"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/models/presets"
)

// randomCheckpoint is preset's random checkpoint in layout and dtype dt,
// opened from memory through a recorder of its reads.
func randomCheckpoint(t *testing.T, preset string, layout *config.Layout, dt safetensors.DType) (*config.Config, *safetensors.Checkpoint, *safetensors.Recorder) {
	t.Helper()
	raw, err := presets.Read(preset)
	require.NoError(t, err)
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	if layout != nil {
		cfg.Layout = *layout
	}
	ts, err := RandomCheckpoint(cfg, 1, dt)
	require.NoError(t, err)
	ck, rec, err := safetensors.RecordTensors(ts)
	require.NoError(t, err)
	return cfg, ck, rec
}

// readEnd is the furthest byte of the reads rec recorded from its from'th on.
func readEnd(rec *safetensors.Recorder, from int) int64 {
	var end int64
	for _, r := range rec.Ranges()[from:] {
		end = max(end, r.Off+r.N)
	}
	return end
}

// headerEnd is where a single-file checkpoint's tensor data begins.
func headerEnd(ck *safetensors.Checkpoint) int64 {
	first := int64(math.MaxInt64)
	for _, n := range ck.Names() {
		tn, _ := ck.Tensor(n)
		first = min(first, tn.Offset)
	}
	return first
}

// TestCheckHeaderNeeds checks CheckHeader's figures against the
// configuration's parameter counts on float32 checkpoints of every family
// (4 bytes a parameter: the decode reads are ComputeStats's
// DecodeReadParams, the weights its text parameters), and that it reads
// the header alone.
func TestCheckHeaderNeeds(t *testing.T) {
	for _, tc := range []struct {
		preset string
		layout *config.Layout
	}{
		{"k3-nano", new(config.LayoutKimiLinear)},
		{"k3-nano", new(config.LayoutKimiK3)},
		{"k3-nano-vision", nil},
		{"kimi-linear-nano", nil},
		{"qwen3-next-nano", nil},
		{"deepseek-v3-nano", nil},
	} {
		t.Run(tc.preset, func(t *testing.T) {
			cfg, ck, rec := randomCheckpoint(t, tc.preset, tc.layout, safetensors.F32)
			before := len(rec.Ranges())
			n, err := CheckHeader(cfg, ck)
			require.NoError(t, err)
			assert.LessOrEqual(t, readEnd(rec, before), headerEnd(ck), "read tensor data")
			s := ComputeStats(cfg)
			assert.Equal(t, s, n.Stats)
			assert.Equal(t, 4*(s.TotalParams-s.VisionParams), n.Weights)
			assert.Equal(t, 4*s.VisionParams, n.Vision)
			assert.Equal(t, map[tensor.DType]int64{tensor.F32: 4 * s.DecodeReadParams}, n.Decode)
			assert.Equal(t, n.Weights+s.KDAStateBytes+10*s.CacheBytesPerTok, n.Memory(10))
		})
	}
}

// TestCheckHeaderTypes: a half-precision checkpoint's matrices are read
// as F16, its vectors as float32, the embedding table one row a token.
func TestCheckHeaderTypes(t *testing.T) {
	cfg, ck, _ := randomCheckpoint(t, "k3-nano", nil, safetensors.F16)
	n, err := CheckHeader(cfg, ck)
	require.NoError(t, err)
	assert.Equal(t, []tensor.DType{tensor.F16, tensor.F32}, n.DecodeTypes())
	emb, ok := ck.Tensor("model.embed_tokens.weight")
	require.True(t, ok)
	var full int64
	for _, name := range ck.Names() {
		tn, _ := ck.Tensor(name)
		full += tn.Size
	}
	assert.Equal(t, full, n.Weights)
	assert.Less(t, n.DecodeBytes(), full-emb.Size+emb.Size/int64(cfg.VocabSize)+1)
}

// TestCheckHeaderRefusesAsLoad: a checkpoint Load refuses is refused from
// its header with the same error.
func TestCheckHeaderRefusesAsLoad(t *testing.T) {
	cfg, ck, _ := randomCheckpoint(t, "k3-nano", nil, safetensors.F32)
	other := *cfg
	other.HiddenSize *= 2
	_, lerr := Load(&other, ck)
	require.Error(t, lerr)
	_, cerr := CheckHeader(&other, ck)
	require.Error(t, cerr)
	assert.Equal(t, lerr.Error(), cerr.Error())
}

// TestHeapLimit: with a heap limit below what the model needs, Load
// refuses it naming the sizes, before reading any tensor; a deferred
// load (weights left for a GPU) is not limited.
func TestHeapLimit(t *testing.T) {
	cfg, ck, rec := randomCheckpoint(t, "k3-nano", nil, safetensors.F32)
	defer func(old int64) { HeapLimit = old }(HeapLimit)
	HeapLimit = 1 << 10
	before := len(rec.Ranges())
	_, err := Load(cfg, ck)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "WebAssembly heap")
	assert.LessOrEqual(t, readEnd(rec, before), headerEnd(ck))
	_, err = LoadDeferred(cfg, ck)
	require.NoError(t, err)
	HeapLimit = 1 << 40
	_, err = Load(cfg, ck)
	require.NoError(t, err)
}

// TestProbeMats: the estimate's random matrices of every type are valid
// matrices whose products are finite (their scales set where the format
// keeps them).
func TestProbeMats(t *testing.T) {
	types := []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8, tensor.Q8_0, tensor.Q4_0, tensor.Q4K,
		tensor.Q5K, tensor.Q6K, tensor.MXFP4, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1}
	for _, dt := range types {
		t.Run(dt.String(), func(t *testing.T) {
			m := probeMat(dt, 8, 256, rngFor(dt))
			x := make([]float32, 256)
			for i := range x {
				x[i] = float32(i%7) - 3
			}
			out := make([]float32, 8)
			ref.Linear(nil, out, x, 1, m)
			for i, v := range out {
				assert.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0), "row %d: %v", i, v)
			}
			w := make([]float32, 256)
			for r := range 8 {
				for _, v := range m.Row(r, w) {
					require.LessOrEqual(t, math.Abs(float64(v)), 64.0, "row %d", r)
				}
			}
		})
	}
}

// TestEstimateDecode: the estimate measures the main type and the state's
// float32, counts a rare type at the main rate, and gives a speed.
func TestEstimateDecode(t *testing.T) {
	cfg, ck, _ := randomCheckpoint(t, "k3-nano", nil, safetensors.F16)
	n, err := CheckHeader(cfg, ck)
	require.NoError(t, err)
	n.Decode[tensor.Q4K] = 1 // rare: not timed
	e := EstimateDecode(n, cfg.HiddenSize, nil, 4096, time.Millisecond)
	require.Greater(t, e.TokPerSec, 0.0)
	var secs float64
	for _, p := range e.Probes {
		require.Greater(t, p.Rate, 0.0, p.Type)
		secs += float64(p.Bytes) / p.Rate
		assert.Equal(t, p.Type != tensor.Q4K, p.Measured, p.Type)
	}
	assert.InDelta(t, 1/secs, e.TokPerSec, 1e-6*e.TokPerSec)
	require.Len(t, e.Probes, 3) // F16, F32 (vectors, state and cache), Q4_K
	assert.True(t, slices.IsSortedFunc(e.Probes, func(a, b Probe) int { return cmp.Compare(b.Bytes, a.Bytes) }))
	state := 2*n.KDAStateBytes + 4096*n.CacheBytesPerTok
	for _, p := range e.Probes {
		want := map[tensor.DType]int64{tensor.F16: n.Decode[tensor.F16], tensor.F32: n.Decode[tensor.F32] + state, tensor.Q4K: 1}[p.Type]
		assert.Equal(t, want, p.Bytes, p.Type)
	}
}
