package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

func TestQuantize(t *testing.T) {
	base := t.TempDir()
	f, q, r := filepath.Join(base, "f"), filepath.Join(base, "q"), filepath.Join(base, "r")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "2", "--out", f)
	require.Zero(t, code, errs)
	code, out, errs := tessera(t, "quantize", "--model", f, "--out", q)
	require.Zero(t, code, errs)
	require.Contains(t, out, "(q8)")
	code, out, errs = tessera(t, "inspect", q)
	require.Zero(t, code, errs)
	require.Contains(t, out, "I8:")
	// init-random --quant q8 writes the same checkpoint.
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--seed", "2", "--quant", "q8", "--out", r)
	require.Zero(t, code, errs)
	run := func(dir, backend string) string {
		code, out, errs := tessera(t, "run", "--model", dir, "--tokens", "1,2,3,4", "--max-tokens", "8", "--ids", "--backend", backend)
		require.Zero(t, code, errs)
		return out
	}
	require.Equal(t, run(q, "cpu"), run(r, "cpu"))
	require.Len(t, strings.Fields(run(q, "cpu")), 8)
	code, _, errs = tessera(t, "quantize", "--model", q, "--out", filepath.Join(base, "qq"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "already quantized")
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--quant", "q4", "--out", r)
	require.Equal(t, 1, code)
	require.Contains(t, errs, `--quant "q4"`)
}

// Q8 weights run on the GPU backend too (widened to f16 on upload) with the
// CPU's greedy tokens.
func TestQuantizeGPU(t *testing.T) {
	requireGPU(t)
	dir := filepath.Join(t.TempDir(), "q")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "3", "--quant", "q8", "--out", dir)
	require.Zero(t, code, errs)
	run := func(backend string) string {
		code, out, errs := tessera(t, "run", "--model", dir, "--tokens", "5,6,7,8", "--max-tokens", "10", "--ids", "--backend", backend)
		require.Zero(t, code, errs)
		return out
	}
	require.Equal(t, run("cpu"), run("gpu"))
}

// TestQuantizeMXFP4Safetensors: `quantize --type mxfp4` into a directory
// writes Kimi K3's checkpoint format (compressed-tensors MXFP4 routed
// experts, the rest as it was); loaded back, every expert matrix is
// MXFP4 (not widened) with the bytes of the GGUF MXFP4 export of the same
// model, and the model runs. init-random --quant mxfp4 writes the same
// checkpoint as quantizing its float output.
func TestQuantizeMXFP4Safetensors(t *testing.T) {
	base := t.TempDir()
	src := "../../models/k3-micro"
	ct, gg := filepath.Join(base, "ct"), filepath.Join(base, "m.gguf")
	code, out, errs := tessera(t, "quantize", "--model", src, "--type", "mxfp4", "--out", ct)
	require.Zero(t, code, errs)
	require.Contains(t, out, "(mxfp4)")
	code, _, errs = tessera(t, "quantize", "--model", src, "--type", "mxfp4", "--out", gg)
	require.Zero(t, code, errs)

	mc, ckc, err := model.OpenDir(ct)
	require.NoError(t, err)
	defer ckc.Close()
	mg, ckg, err := model.OpenDir(gg)
	require.NoError(t, err)
	defer ckg.Close()
	ms, cks, err := model.OpenDir(src)
	require.NoError(t, err)
	defer cks.Close()
	require.Equal(t, "mxfp4", mc.Cfg.Quant)
	experts := 0
	for l, lc := range mc.Layers {
		if lc.MoE == nil {
			continue
		}
		for e := range lc.MoE.Experts {
			xc, xg := &lc.MoE.Experts[e], &mg.Layers[l].MoE.Experts[e]
			for i, pair := range [][2]*tensor.Mat{{xc.GateProj, xg.GateProj}, {xc.UpProj, xg.UpProj}, {xc.DownProj, xg.DownProj}} {
				require.Equal(t, tensor.MXFP4, pair[0].DType, "layer %d expert %d matrix %d", l, e, i)
				require.Equal(t, pair[1].Q, pair[0].Q, "layer %d expert %d matrix %d: bytes differ from the GGUF export's", l, e, i)
				experts++
			}
		}
		sh := lc.MoE.SharedExperts.GateProj
		require.Equal(t, ms.Layers[l].MoE.SharedExperts.GateProj.DType, sh.DType, "shared experts keep their type")
		require.Equal(t, ms.Layers[l].MoE.SharedExperts.GateProj.U16, sh.U16, "shared experts keep their values")
	}
	require.NotZero(t, experts)
	code, out, errs = tessera(t, "inspect", ct)
	require.Zero(t, code, errs)
	require.Contains(t, out, "MXFP4:")
	code, out, errs = tessera(t, "run", "--model", ct, "--tokens", "1,2,3,4", "--max-tokens", "6", "--ids", "--backend", "cpu")
	require.Zero(t, code, errs)
	require.Len(t, strings.Fields(out), 6)

	f, r, q := filepath.Join(base, "f"), filepath.Join(base, "r"), filepath.Join(base, "q")
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--seed", "4", "--out", f)
	require.Zero(t, code, errs)
	code, _, errs = tessera(t, "init-random", "--config", "k3-nano", "--seed", "4", "--quant", "mxfp4", "--out", r)
	require.Zero(t, code, errs)
	code, _, errs = tessera(t, "quantize", "--model", f, "--type", "mxfp4", "--out", q)
	require.Zero(t, code, errs)
	rb, err := os.ReadFile(filepath.Join(r, "model.safetensors"))
	require.NoError(t, err)
	qb, err := os.ReadFile(filepath.Join(q, "model.safetensors"))
	require.NoError(t, err)
	require.Equal(t, len(qb), len(rb))
	code, _, errs = tessera(t, "quantize", "--model", f, "--type", "q4_k", "--out", filepath.Join(base, "dir"))
	require.Equal(t, 1, code)
	require.Contains(t, errs, "must end in .gguf")
}

// TestMXFP4CheckpointBadInput: a compressed-tensors MXFP4 checkpoint with a
// scale tensor of the wrong shape, a packed tensor the config's ignore list
// leaves in float, or a quantization_config tessera does not run is
// refused with one line naming the tensor or field.
func TestMXFP4CheckpointBadInput(t *testing.T) {
	base := t.TempDir()
	good := filepath.Join(base, "good")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--seed", "5", "--quant", "mxfp4", "--out", good)
	require.Zero(t, code, errs)
	cfgJSON, err := os.ReadFile(filepath.Join(good, "config.json"))
	require.NoError(t, err)
	ck, err := safetensors.OpenDir(good)
	require.NoError(t, err)
	defer ck.Close()
	// The checkpoint's tensors as written, with edit applied.
	rewrite := func(name string, edit func(*safetensors.WriteTensor), cfgEdit func(string) string) string {
		dir := filepath.Join(base, name)
		require.NoError(t, os.MkdirAll(dir, 0o755))
		var ts []safetensors.WriteTensor
		for _, n := range ck.Names() {
			tt, _ := ck.Tensor(n)
			w := safetensors.WriteTensor{Name: n, DType: tt.DType, Shape: tt.Shape}
			if tt.DType == safetensors.U8 {
				b, err := ck.Bytes(n)
				require.NoError(t, err)
				for _, v := range b {
					w.Data = append(w.Data, float32(v))
				}
			} else {
				w.Data, err = ck.Float32(n)
				require.NoError(t, err)
			}
			edit(&w)
			ts = append(ts, w)
		}
		require.NoError(t, safetensors.WriteDir(dir, ts, nil, 0))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfgEdit(string(cfgJSON))), 0o644))
		return dir
	}
	same := func(s string) string { return s }
	const victim = "model.layers.1.block_sparse_moe.experts.3.w2.weight_scale"
	for _, c := range []struct {
		name, want string
		edit       func(*safetensors.WriteTensor)
		cfg        func(string) string
	}{
		{"scale-shape", victim, func(w *safetensors.WriteTensor) {
			if strings.HasSuffix(w.Name, victim) {
				w.Shape = []int{w.Shape[0] * w.Shape[1]}
			}
		}, same},
		{"ignored", "experts.0.w1.weight_packed", func(*safetensors.WriteTensor) {}, func(s string) string {
			return strings.Replace(s, `"lm_head"`, `"re:.*experts.*"`, 1)
		}},
		{"group-size", "quantization_config", func(*safetensors.WriteTensor) {}, func(s string) string {
			return strings.Replace(s, `"group_size": 32`, `"group_size": 16`, 1)
		}},
	} {
		dir := rewrite(c.name, c.edit, c.cfg)
		code, _, errs := tessera(t, "run", "--model", dir, "--tokens", "1,2", "--max-tokens", "1")
		require.Equal(t, 1, code, c.name)
		require.Contains(t, errs, c.want, c.name)
		require.Equal(t, 1, strings.Count(strings.TrimSpace(errs), "\n")+1, "%s: %s", c.name, errs)
	}
	code, _, errs = tessera(t, "run", "--model", rewrite("control", func(*safetensors.WriteTensor) {}, same), "--tokens", "1,2", "--max-tokens", "1")
	require.Zero(t, code, errs)
}
