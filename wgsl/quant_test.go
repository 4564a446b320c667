//go:build cgo && !js

package wgsl_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/wgsl"
)

// TestRunnerQuantizedMatchesCPU runs k3-micro exported to GGUF in each
// block type tessera writes (Q8_0, Q4_0, Q4_K; MXFP4 experts with Q8_0
// elsewhere) on the GPU, its matrices kept in their blocks: greedy tokens
// after a prefill equal the CPU's on the same file, the weights on the GPU
// take what EstimateMemory says, and that is about the file's size (not
// the F16 size the widened upload took).
func TestRunnerQuantizedMatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("exports k3-micro four times")
	}
	d := device(t)
	defer device(t).SetRepeatFusions(true, 0)() // the router inside gate/up and the AttnRes fold, which software adapters skip
	dir := filepath.Join("..", "models", "k3-micro")
	prompt := make([]int, 23)
	for i := range prompt {
		prompt[i] = (i*389 + 7) % 2000
	}
	for _, typ := range []string{"q8_0", "q4_0", "q4_k", "mxfp4"} {
		t.Run(typ, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), typ+".gguf")
			if err := gguf.Export(dir, path, gguf.ExportOptions{Type: typ}); err != nil {
				t.Fatal(err)
			}
			m, ck, err := gguf.OpenModel(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			blocked := 0
			m.Declare(uploaderFunc(func(w *tensor.Mat) {
				if wgsl.BlockFormat(w.DType) {
					blocked++
				}
			}))
			if blocked == 0 {
				t.Fatalf("no block-format matrices in the %s export", typ)
			}
			opt := wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 128}
			est := wgsl.EstimateMemory(m, opt)
			g, err := wgsl.NewRunner(d, m, opt)
			if err != nil {
				t.Fatal(err)
			}
			defer g.Close()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := g.WeightBytesForTest(); got != est.Weights {
				t.Errorf("weights on the GPU: runner %d B, EstimateMemory %d B", got, est.Weights)
			}
			if r := float64(est.Weights) / float64(fi.Size()); r < 0.9 || r > 1.1 {
				t.Errorf("GPU weights %d B, file %d B (ratio %.2f): want about the file's size", est.Weights, fi.Size(), r)
			}
			// The CPU on the same file. With exact products (float32 on
			// the dequantized weights, `--exact`: the GPU's arithmetic)
			// both backends agree to float32 rounding: the same greedy
			// tokens. By default, on CPUs with integer kernels (AVX-512
			// VNNI, AVX2) the CPU rounds activations to int8 per block as
			// llama.cpp does, which can break a near-tie the other way, so
			// those tokens are logged, not required to agree.
			const gen = 32
			for _, exact := range []bool{true, false} {
				was := ref.SetInt8Activations(false)
				if !exact {
					ref.SetInt8Activations(was) // this CPU's choice
				}
				got := gpuGreedy(t, g, prompt, gen)
				want := cpuGreedy(t, m, prompt, gen)
				ref.SetInt8Activations(was)
				same := 0
				for same < gen && got[same] == want[same] {
					same++
				}
				t.Logf("exact %v (CPU integer kernels %v): %d block-format matrices; GPU weights %d B, file %d B; greedy tokens GPU = CPU for %d of %d",
					exact, !exact && was, blocked, est.Weights, fi.Size(), same, gen)
				if exact && !slices.Equal(got, want) {
					t.Errorf("greedy tokens with exact products: GPU %v, CPU %v", got, want)
				}
			}
		})
	}
}

// uploaderFunc is an nn.Uploader calling f on every declared matrix.
type uploaderFunc func(*tensor.Mat)

func (f uploaderFunc) Mats(_ []string, ms ...*tensor.Mat) {
	for _, m := range ms {
		if m != nil {
			f(m)
		}
	}
}

func (f uploaderFunc) Vecs([]string, ...[]float32) {}

func (f uploaderFunc) GLUs(_ string, ws []nn.GLU) {
	for _, w := range ws {
		f.Mats(nil, w.GateProj, w.UpProj, w.DownProj)
	}
}

func (f uploaderFunc) Err() error { return nil }

// gpuGreedy is gen greedy tokens of g after prompt (prefill in pieces of
// 8), from a fresh state.
func gpuGreedy(t *testing.T, g *wgsl.Runner, prompt []int, gen int) []int {
	t.Helper()
	if err := g.Reset(); err != nil {
		t.Fatal(err)
	}
	var tok int
	var err error
	for p0 := 0; p0 < len(prompt); p0 += 8 {
		if tok, err = g.Greedy(prompt[p0:min(p0+8, len(prompt))]); err != nil {
			t.Fatal(err)
		}
	}
	var got []int
	for range gen {
		got = append(got, tok)
		if tok, err = g.Greedy([]int{tok}); err != nil {
			t.Fatal(err)
		}
	}
	return got
}

// cpuGreedy is gen greedy tokens of m on the CPU after prompt (prefill in
// pieces of 8).
func cpuGreedy(t *testing.T, m *model.Model, prompt []int, gen int) []int {
	t.Helper()
	cpu := model.NewRunner(m, model.Options{MaxChunk: 8})
	defer cpu.Close()
	st := m.NewState()
	V := m.Cfg.VocabSize
	logits := make([]float32, 8*V)
	for p0 := 0; p0 < len(prompt); p0 += 8 {
		piece := prompt[p0:min(p0+8, len(prompt))]
		if err := cpu.Forward(st, piece, logits[:len(piece)*V]); err != nil {
			t.Fatal(err)
		}
	}
	last := (len(prompt) - 1) % 8
	toks := []int{generate.Argmax(logits[last*V : (last+1)*V])}
	for len(toks) < gen {
		if err := cpu.Forward(st, toks[len(toks)-1:], logits[:V]); err != nil {
			t.Fatal(err)
		}
		toks = append(toks, generate.Argmax(logits[:V]))
	}
	return toks
}

// TestRunnerQ8MatchesCPU: tessera's own int8 weights (Q8: one float32
// scale per row, `tessera quantize`) stay int8 on the GPU — about half the
// F16 upload — and give the CPU's greedy tokens.
func TestRunnerQ8MatchesCPU(t *testing.T) {
	if testing.Short() {
		t.Skip("k3-micro on the GPU")
	}
	d := device(t)
	m, ck, err := model.OpenDir(filepath.Join("..", "models", "k3-micro"))
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	opt := wgsl.RunnerOptions{MaxChunk: 8, MaxContext: 128}
	float := wgsl.EstimateMemory(m, opt).Weights
	var q8, host int64
	m.Declare(uploaderFunc(func(w *tensor.Mat) {
		if w.DType <= tensor.BF16 && w.Cols%32 == 0 {
			*w = *tensor.Quantize(tensor.NewF32(w.Rows, w.Cols, w.Float32()))
			q8++
			host += w.Bytes()
		}
	}))
	est := wgsl.EstimateMemory(m, opt)
	g, err := wgsl.NewRunner(d, m, opt)
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if got := g.WeightBytesForTest(); got != est.Weights {
		t.Errorf("weights on the GPU: runner %d B, EstimateMemory %d B", got, est.Weights)
	}
	if r := float64(est.Weights) / float64(float); r > 0.6 {
		t.Errorf("Q8 weights take %d B on the GPU, %.2f of the unquantized model's %d B: want about half", est.Weights, r, float)
	}
	prompt := make([]int, 23)
	for i := range prompt {
		prompt[i] = (i*389 + 7) % 2000
	}
	const gen = 32
	got, want := gpuGreedy(t, g, prompt, gen), cpuGreedy(t, m, prompt, gen)
	t.Logf("%d Q8 matrices (%d B on the host); GPU weights %d B (unquantized %d B)", q8, host, est.Weights, float)
	if !slices.Equal(got, want) {
		t.Errorf("greedy tokens: GPU %v, CPU %v", got, want)
	}
}
