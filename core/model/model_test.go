package model

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/models/presets"
)

// randomModel builds a random model of a preset entirely in memory.
func randomModel(t testing.TB, preset string, layout config.Layout, dt safetensors.DType, seed uint64) *Model {
	t.Helper()
	raw, err := presets.Read(preset)
	require.NoError(t, err)
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	cfg.Layout = layout
	var buf bytes.Buffer
	require.NoError(t, safetensors.Write(&buf, RandomTensors(cfg, seed, dt), nil))
	ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": buf.Bytes()}))
	require.NoError(t, err)
	m, err := Load(cfg, ck)
	require.NoError(t, err)
	return m
}

func fullLogits(t testing.TB, m *Model, ids []int, opt Options) []float32 {
	r := NewRunner(m, opt)
	defer r.Close()
	V := m.Cfg.VocabSize
	out := make([]float32, len(ids)*V)
	st := m.NewState()
	for i := 0; i < len(ids); i += opt.MaxChunk {
		j := min(len(ids), i+opt.MaxChunk)
		require.NoError(t, r.Forward(st, ids[i:j], out[i*V:j*V]))
	}
	return out
}

func testIDs(n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 13) % vocab
	}
	return ids
}

// Decoding token t (with everything before it cached) must give the logits
// of position t of one forward over the whole sequence.
func TestDecodeEqualsFullForward(t *testing.T) {
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		m := randomModel(t, preset, config.LayoutKimiLinear, "F32", 3)
		ids := testIDs(90, m.Cfg.VocabSize)
		full := fullLogits(t, m, ids, Options{MaxChunk: 90})
		step := fullLogits(t, m, ids, Options{MaxChunk: 1})
		require.Less(t, relErr(step, full), 1e-4, preset)
		// The decode forms (recurrent KDA, absorbed MLA) used for prefill
		// too must agree as well.
		rec := fullLogits(t, m, ids, Options{MaxChunk: 30, RecurrentPrefill: true})
		require.Less(t, relErr(rec, full), 1e-4, preset)
	}
}

// Half-precision weights (decoded row by row inside Linear) give the same
// result as float32 weights holding the same rounded values.
func TestHalfWeights(t *testing.T) {
	raw, _ := presets.Read("k3-nano")
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	ids := testIDs(20, 512)
	for _, dt := range []safetensors.DType{"F16", "BF16"} {
		half := RandomTensors(cfg, 5, dt)
		var hb, fb bytes.Buffer
		require.NoError(t, safetensors.Write(&hb, half, nil))
		hck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": hb.Bytes()}))
		require.NoError(t, err)
		// The same values, rounded through the half type, stored as F32.
		for i := range half {
			if half[i].DType != dt {
				continue
			}
			v, err := hck.Float32(half[i].Name)
			require.NoError(t, err)
			half[i] = safetensors.WriteTensor{Name: half[i].Name, DType: "F32", Shape: half[i].Shape, Data: v}
		}
		require.NoError(t, safetensors.Write(&fb, half, nil))
		fck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": fb.Bytes()}))
		require.NoError(t, err)
		hm, err := Load(cfg, hck)
		require.NoError(t, err)
		require.Equal(t, string(dt), hm.Layers[0].KDA.QProj.DType.String())
		fm, err := Load(cfg, fck)
		require.NoError(t, err)
		got := fullLogits(t, hm, ids, Options{MaxChunk: 8})
		want := fullLogits(t, fm, ids, Options{MaxChunk: 8})
		require.Less(t, relErr(got, want), 1e-6, dt)
	}
}

// With attn_res_block_size null the layer is the standard pre-norm block:
// ffn_in = layer_in + mixer_out and the next layer_in = ffn_in + ffn_out.
func TestStandardResidualPath(t *testing.T) {
	m := randomModel(t, "kimi-linear-nano", config.LayoutKimiLinear, "F32", 2)
	r := NewRunner(m, Options{MaxChunk: 16})
	defer r.Close()
	got := map[string][]float32{}
	r.Trace = func(n string, l int, data []float32, T int) {
		got[fmt.Sprintf("%s.%d", n, l)] = append([]float32(nil), data...)
	}
	require.NoError(t, r.Forward(m.NewState(), testIDs(16, 512), nil))
	sum := func(a, b []float32) []float32 {
		out := make([]float32, len(a))
		for i := range a {
			out[i] = a[i] + b[i]
		}
		return out
	}
	for i := 0; i < m.Cfg.NumHiddenLayers; i++ {
		require.Equal(t, sum(got[fmt.Sprintf("layer_in.%d", i)], got[fmt.Sprintf("mixer_out.%d", i)]), got[fmt.Sprintf("ffn_in.%d", i)])
		if i+1 < m.Cfg.NumHiddenLayers {
			require.Equal(t, sum(got[fmt.Sprintf("ffn_in.%d", i)], got[fmt.Sprintf("ffn_out.%d", i)]), got[fmt.Sprintf("layer_in.%d", i+1)])
		}
	}
}

// The routed MoE (tokens grouped by expert, only selected experts run)
// equals evaluating every expert densely and masking by the selection.
func TestRoutedMoEEqualsDenseMasked(t *testing.T) {
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		m := randomModel(t, preset, config.LayoutKimiLinear, "F32", 4)
		c := m.Cfg
		r := NewRunner(m, Options{MaxChunk: 32})
		T, d := 32, c.HiddenSize
		x := make([]float32, T*d)
		for i := range x {
			x[i] = float32((i*37)%19)/9 - 1
		}
		l := m.Layers[1]
		require.NotNil(t, l.MoE)
		got := make([]float32, T*d)
		r.b.moe(l.MoE, actOf(c), x, got, T)

		want := denseMoE(r, l.MoE, x, T)
		require.Less(t, relErr(got, want), 1e-5, preset)
		r.Close()
	}
}

// denseMoE runs every expert on every token and keeps the selected ones.
func denseMoE(r *Runner, w *MoE, x []float32, T int) []float32 {
	c := r.M.Cfg
	d, E, K, wd := c.HiddenSize, c.NumExperts, c.TopK, c.ExpertWidth()
	out := make([]float32, T*d)
	for t := 0; t < T; t++ {
		xt := x[t*d : (t+1)*d]
		logits := make([]float32, E)
		ref.Linear(nil, logits, xt, 1, w.Gate)
		idx, wts := make([]int, K), make([]float32, K)
		ref.Router{TopK: K, Groups: c.NumExpertGroup, TopKGroups: c.TopKGroup, Renormalize: c.Renormalize,
			Scale: c.RoutedScalingFactor}.Route(idx, wts, logits, w.EScoreCorrectionBias, make([]float32, 2*E))
		mask := make([]float32, E)
		for k, e := range idx {
			mask[e] = wts[k]
		}
		z := xt
		if w.RoutedExpertDownProj != nil {
			z = make([]float32, wd)
			ref.Linear(nil, z, xt, 1, w.RoutedExpertDownProj)
		}
		acc := make([]float32, wd)
		for e := 0; e < E; e++ {
			y := make([]float32, wd)
			I := w.Experts[e].GateProj.Rows
			h1, h2 := make([]float32, I), make([]float32, I)
			ref.Linear(nil, h1, z, 1, w.Experts[e].GateProj)
			ref.Linear(nil, h2, z, 1, w.Experts[e].UpProj)
			actOf(c).GLU(h1, h1, h2)
			ref.Linear(nil, y, h1, 1, w.Experts[e].DownProj)
			ref.Axpy(mask[e], y, acc)
		}
		o := out[t*d : (t+1)*d]
		if w.RoutedExpertUpProj != nil {
			if w.RoutedExpertNorm != nil {
				ref.RMSNorm(acc, acc, w.RoutedExpertNorm, c.RMSNormEps)
			}
			ref.Linear(nil, o, acc, 1, w.RoutedExpertUpProj)
		} else {
			copy(o, acc)
		}
		if s := w.SharedExperts; s != nil {
			I := s.GateProj.Rows
			h1, h2, y := make([]float32, I), make([]float32, I), make([]float32, d)
			ref.Linear(nil, h1, xt, 1, s.GateProj)
			ref.Linear(nil, h2, xt, 1, s.UpProj)
			actOf(c).GLU(h1, h1, h2)
			ref.Linear(nil, y, h1, 1, s.DownProj)
			ref.Axpy(1, y, o)
		}
	}
	return out
}

// A cloned state continues exactly like the original.
func TestStateClone(t *testing.T) {
	m := randomModel(t, "k3-nano", config.LayoutKimiLinear, "F32", 6)
	r := NewRunner(m, Options{MaxChunk: 8})
	defer r.Close()
	st := m.NewState()
	V := m.Cfg.VocabSize
	require.NoError(t, r.Forward(st, testIDs(8, V), nil))
	cl := st.Clone()
	a, b := make([]float32, V), make([]float32, V)
	require.NoError(t, r.Forward(st, []int{5, 6}, a))
	require.NoError(t, r.Forward(cl, []int{5, 6}, b))
	require.Equal(t, a, b)
	st.Reset()
	require.Equal(t, 0, st.Pos())
}

func TestForwardErrors(t *testing.T) {
	m := randomModel(t, "k3-nano", config.LayoutKimiLinear, "F32", 6)
	r := NewRunner(m, Options{MaxChunk: 4})
	defer r.Close()
	st := m.NewState()
	require.ErrorContains(t, r.Forward(st, []int{1, 512}, nil), "token 512 (index 1) is outside the vocabulary")
	require.ErrorContains(t, r.Forward(st, make([]int, 5), nil), "exceed the runner's chunk")
	m.Cfg.MaxPositions = 3
	require.ErrorContains(t, r.Forward(st, make([]int, 4), nil), "exceeds the model's context of 3")
}

// Round trip through the checkpoint writer in both layouts, each dtype,
// single file and sharded.
func TestLoadRoundTrip(t *testing.T) {
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		for _, layout := range []config.Layout{config.LayoutKimiLinear, config.LayoutKimiK3} {
			for _, dt := range []safetensors.DType{"F32", "F16", "BF16"} {
				for _, shard := range []int64{0, 200_000} {
					name := fmt.Sprintf("%s/%s/%s/shard=%d", preset, layout, dt, shard)
					t.Run(name, func(t *testing.T) {
						dir := t.TempDir()
						raw, _ := presets.Read(preset)
						cfg, err := config.Parse(raw)
						require.NoError(t, err)
						js, err := cfg.Marshal(layout)
						require.NoError(t, err)
						require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), js, 0o644))
						cfg.Layout = layout
						require.NoError(t, safetensors.WriteDir(dir, RandomTensors(cfg, 1, dt), nil, shard))
						if shard > 0 {
							require.FileExists(t, filepath.Join(dir, "model.safetensors.index.json"))
						}
						m, ck, err := OpenDir(dir)
						require.NoError(t, err)
						defer ck.Close()
						require.Equal(t, layout, m.Cfg.Layout)
						// Same seed, same values whatever the layout or sharding.
						want := randomModel(t, preset, config.LayoutKimiLinear, dt, 1)
						ids := testIDs(5, 512)
						require.Equal(t, fullLogits(t, want, ids, Options{MaxChunk: 5}), fullLogits(t, m, ids, Options{MaxChunk: 5}))
					})
				}
			}
		}
	}
}

// Missing, mis-shaped, wrongly typed and unexpected tensors are reported by name.
func TestLoadErrors(t *testing.T) {
	raw, _ := presets.Read("k3-nano")
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	base := RandomTensors(cfg, 1, "F32")
	load := func(ts []safetensors.WriteTensor) error {
		var buf bytes.Buffer
		require.NoError(t, safetensors.Write(&buf, ts, nil))
		ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": buf.Bytes()}))
		require.NoError(t, err)
		_, err = Load(cfg, ck)
		return err
	}
	edit := func(f func(ts []safetensors.WriteTensor) []safetensors.WriteTensor) []safetensors.WriteTensor {
		cp := append([]safetensors.WriteTensor(nil), base...)
		return f(cp)
	}
	require.NoError(t, load(base))
	err = load(edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i, x := range ts {
			if x.Name == "model.layers.3.self_attn.kv_b_proj.weight" {
				return append(ts[:i], ts[i+1:]...)
			}
		}
		return ts
	}))
	require.ErrorContains(t, err, "tensor model.layers.3.self_attn.kv_b_proj.weight: missing from checkpoint (expected shape [128 32])")
	err = load(edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		for i, x := range ts {
			if x.Name == "model.layers.0.self_attn.q_proj.weight" {
				ts[i] = safetensors.WriteTensor{Name: x.Name, DType: "F32", Shape: []int{64, 63}, Data: x.Data[:64*63]}
			}
		}
		return ts
	}))
	require.ErrorContains(t, err, "tensor model.layers.0.self_attn.q_proj.weight: expected shape [64 64], found [64 63]")
	err = load(edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return append(ts, safetensors.WriteTensor{Name: "model.layers.0.mystery.weight", DType: "F32", Shape: []int{2}, Data: []float32{1, 2}})
	}))
	require.ErrorContains(t, err, "does not use: model.layers.0.mystery.weight")
	// Vision tensors are knowingly ignored.
	require.NoError(t, load(edit(func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
		return append(ts, safetensors.WriteTensor{Name: "vision_tower.patch_embed.weight", DType: "F32", Shape: []int{2}, Data: []float32{1, 2}})
	})))
	// A kimi_k3 config over kimi_linear names: every tensor is missing its prefix.
	cfg.Layout = config.LayoutKimiK3
	err = load(base)
	require.Error(t, err)
	require.True(t, strings.Contains(err.Error(), "language_model.model.embed_tokens.weight: missing"), err.Error())
}

// A q8 checkpoint loads as int8 matrices and its logits stay close to the
// float model's; the loader refuses int8 tensors without a
// quantization_config.
func TestQ8Checkpoint(t *testing.T) {
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		raw, _ := presets.Read(preset)
		cfg, err := config.Parse(raw)
		require.NoError(t, err)
		ts := RandomTensors(cfg, 4, "F32")
		var fb, qb bytes.Buffer
		require.NoError(t, safetensors.Write(&fb, ts, nil))
		qcfg, err := config.Parse(raw)
		require.NoError(t, err)
		qts := QuantizeQ8(qcfg, ts)
		require.Equal(t, "q8", qcfg.Quant)
		require.NoError(t, safetensors.Write(&qb, qts, nil))
		open := func(b []byte) *safetensors.Checkpoint {
			ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": b}))
			require.NoError(t, err)
			return ck
		}
		fm, err := Load(cfg, open(fb.Bytes()))
		require.NoError(t, err)
		qm, err := Load(qcfg, open(qb.Bytes()))
		require.NoError(t, err)
		require.Equal(t, tensor.Q8, qm.Layers[0].KDA.QProj.DType)
		require.Equal(t, tensor.F32, qm.LMHead.DType)
		ids := testIDs(24, 512)
		want := fullLogits(t, fm, ids, Options{MaxChunk: 8})
		got := fullLogits(t, qm, ids, Options{MaxChunk: 8})
		e := relErr(got, want)
		require.Less(t, e, 0.2, preset) // int8 rounding noise, amplified by random weights
		require.Greater(t, e, 0.0, preset)
		// Exactly the float model holding the dequantized values.
		deq := make([]safetensors.WriteTensor, 0, len(ts))
		for _, tt := range ts {
			if QuantizableQ8(tt.Name, tt.Shape) {
				q := tensor.Quantize(tensor.NewF32(tt.Shape[0], tt.Shape[1], tt.Data))
				tt = safetensors.WriteTensor{Name: tt.Name, DType: "F32", Shape: tt.Shape, Data: q.Float32()}
			}
			deq = append(deq, tt)
		}
		var db bytes.Buffer
		require.NoError(t, safetensors.Write(&db, deq, nil))
		dm, err := Load(cfg, open(db.Bytes()))
		require.NoError(t, err)
		require.Less(t, relErr(got, fullLogits(t, dm, ids, Options{MaxChunk: 8})), 1e-5, preset)
		// Same tensors without the quantization_config: refused by name.
		_, err = Load(cfg, open(qb.Bytes()))
		require.ErrorContains(t, err, "dtype I8 needs a quantization_config")
	}
}

// A compressed-tensors MXFP4 checkpoint (QuantizeMXFP4) loads its routed
// experts as MXFP4 matrices holding ggml's blocks of the float weights
// (tensor.QuantizeMXFP4), eagerly and deferred alike, everything else as
// it was; without its quantization_config the packed tensors are refused.
func TestMXFP4Checkpoint(t *testing.T) {
	raw, _ := presets.Read("k3-nano")
	cfg, err := config.Parse(raw)
	require.NoError(t, err)
	ts := RandomTensors(cfg, 5, "F32")
	qcfg, err := config.Parse(raw)
	require.NoError(t, err)
	qts, err := QuantizeMXFP4(qcfg, ts)
	require.NoError(t, err)
	require.Equal(t, "mxfp4", qcfg.Quant)
	var qb bytes.Buffer
	require.NoError(t, safetensors.Write(&qb, qts, nil))
	ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": qb.Bytes()}))
	require.NoError(t, err)
	m, err := Load(qcfg, ck)
	require.NoError(t, err)
	md, err := LoadDeferred(qcfg, ck)
	require.NoError(t, err)
	float := map[string][]float32{}
	for _, tt := range ts {
		float[tt.Name] = tt.Data
	}
	n := 0
	for l, layer := range m.Layers {
		if layer.MoE == nil {
			continue
		}
		require.Equal(t, tensor.F32, layer.MoE.SharedExperts.GateProj.DType)
		for e := range layer.MoE.Experts {
			for _, p := range []struct {
				name string
				got  *tensor.Mat
				def  *tensor.Mat
			}{
				{"w1", layer.MoE.Experts[e].GateProj, md.Layers[l].MoE.Experts[e].GateProj},
				{"w2", layer.MoE.Experts[e].DownProj, md.Layers[l].MoE.Experts[e].DownProj},
				{"w3", layer.MoE.Experts[e].UpProj, md.Layers[l].MoE.Experts[e].UpProj},
			} {
				name := fmt.Sprintf("model.layers.%d.block_sparse_moe.experts.%d.%s.weight", l, e, p.name)
				want, err := tensor.QuantizeMXFP4(float[name])
				require.NoError(t, err)
				require.Equal(t, tensor.MXFP4, p.got.DType, name)
				require.Equal(t, want, p.got.Q, name)
				require.Equal(t, tensor.MXFP4, p.def.DType, name)
				f, err := p.def.Fetch()
				require.NoError(t, err)
				require.Equal(t, want, f.Q, name+" (deferred)")
				n++
			}
		}
	}
	require.NotZero(t, n)
	_, err = Load(cfg, ck)
	require.ErrorContains(t, err, "weight_packed: compressed-tensors MXFP4 weights need their quantization_config")

	// A config that targets more linear layers (K3's targets every Linear
	// but an ignore list): a packed AttnRes pseudo-query ([1, d], bound as
	// a vector) loads dequantized.
	const res = "model.layers.1.self_attention_res_proj.weight"
	q := config.MXFP4Config()
	g := q["config_groups"].(map[string]any)["group_0"].(map[string]any)
	g["targets"] = []string{"re:" + config.MXFP4ExpertPattern, "re:.*self_attention_res_proj$"}
	require.NoError(t, qcfg.SetQuant(q))
	var rts []safetensors.WriteTensor
	var want []float32
	for _, tt := range qts {
		if tt.Name != res {
			rts = append(rts, tt)
			continue
		}
		blocks, err := tensor.QuantizeMXFP4(tt.Data)
		require.NoError(t, err)
		want = make([]float32, len(tt.Data))
		tensor.Dequantize(tensor.MXFP4, want, blocks)
		packed, scale, err := tensor.MXFP4ToPacked(blocks, tt.Shape[0], tt.Shape[1])
		require.NoError(t, err)
		for _, x := range []struct {
			suffix string
			b      []byte
			cols   int
		}{{"_packed", packed, tt.Shape[1] / 2}, {"_scale", scale, tt.Shape[1] / 32}} {
			v := make([]float32, len(x.b))
			for i, c := range x.b {
				v[i] = float32(c)
			}
			rts = append(rts, safetensors.WriteTensor{Name: res + x.suffix, DType: safetensors.U8, Shape: []int{tt.Shape[0], x.cols}, Data: v})
		}
	}
	require.NotNil(t, want)
	var rb bytes.Buffer
	require.NoError(t, safetensors.Write(&rb, rts, nil))
	rck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{"model.safetensors": rb.Bytes()}))
	require.NoError(t, err)
	rm, err := Load(qcfg, rck)
	require.NoError(t, err)
	require.Equal(t, want, rm.Layers[1].SelfAttentionResProj)
}
