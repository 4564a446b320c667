//go:build cgo && linux && amd64

package llamacpp

import (
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// pplWindow and pplWindows size the held-out text scored per file.
const (
	pplWindow  = 256
	pplWindows = 2
)

// perplexity is exp(mean NLL) of predicting ids[t+1] from logits[t] over
// windows (each window's logits [len, V] come from logitsOf).
func perplexity(windows [][]int, V int, logitsOf func(ids []int) []float32) float64 {
	var nll float64
	n := 0
	for _, w := range windows {
		lg := logitsOf(w)
		for t := 0; t+1 < len(w); t++ {
			row := lg[t*V : (t+1)*V]
			m := math.Inf(-1)
			for _, v := range row {
				m = max(m, float64(v))
			}
			var s float64
			for _, v := range row {
				s += math.Exp(float64(v) - m)
			}
			nll -= float64(row[w[t+1]]) - m - math.Log(s)
			n++
		}
	}
	return math.Exp(nll / float64(n))
}

// TestQuantizedPerplexityMatchesLlamaCpp scores k3-micro's held-out text
// with tessera and with llama.cpp on the same GGUF file, for the block
// formats tessera writes (Q8_0, Q4_0, MXFP4, Q4_K) and those llama.cpp's
// quantizer writes (Q4_K_M, Q5_K_M, Q6_K, MXFP4_MOE), and requires the
// perplexities to agree within 1 %, with tessera's default integer kernels
// and its generic ones. Both engines quantize the activations to 8 bits
// for the dot products of the block formats that have an integer path;
// the others tessera dequantizes exactly.
func TestQuantizedPerplexityMatchesLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("scores 9 files with both engines")
	}
	lib := openPeer(t)
	defer ref.SetInt8Kernels(ref.Int8Kernels()[0])
	dir := filepath.Join("..", "..", "models", "k3-micro")
	tmp := t.TempDir()
	f32 := filepath.Join(tmp, "f32.gguf")
	if err := gguf.Export(dir, f32, gguf.ExportOptions{Type: "f32"}); err != nil {
		t.Fatal(err)
	}
	text, err := os.ReadFile(filepath.Join(dir, "eval", "heldout.txt"))
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(string(text))
	var windows [][]int
	for i := 0; i < pplWindows; i++ {
		windows = append(windows, ids[i*pplWindow:(i+1)*pplWindow])
	}
	files := []struct {
		name string
		make func(out string) error
	}{
		{"F32", func(out string) error { return os.Link(f32, out) }},
		{"Q8_0", func(out string) error { return gguf.Export(dir, out, gguf.ExportOptions{Type: "q8_0"}) }},
		{"Q4_0", func(out string) error { return gguf.Export(dir, out, gguf.ExportOptions{Type: "q4_0"}) }},
		{"MXFP4", func(out string) error { return gguf.Export(dir, out, gguf.ExportOptions{Type: "mxfp4"}) }},
		{"Q4_K", func(out string) error { return gguf.Export(dir, out, gguf.ExportOptions{Type: "q4_k"}) }},
		{"Q4_K_M (llama.cpp)", func(out string) error { return lib.Quantize(f32, out, FTypeQ4_K_M, 1) }},
		{"Q5_K_M (llama.cpp)", func(out string) error { return lib.Quantize(f32, out, FTypeQ5_K_M, 1) }},
		{"Q6_K (llama.cpp)", func(out string) error { return lib.Quantize(f32, out, FTypeQ6_K, 1) }},
		{"MXFP4_MOE (llama.cpp)", func(out string) error { return lib.Quantize(f32, out, FTypeMXFP4_MOE, 1) }},
	}
	for i, f := range files {
		t.Run(f.name, func(t *testing.T) {
			path := filepath.Join(tmp, "m"+string(rune('a'+i))+".gguf")
			if err := f.make(path); err != nil {
				t.Fatal(err)
			}
			tm, ck, err := model.OpenDir(path)
			if err != nil {
				t.Fatal(err)
			}
			defer ck.Close()
			// Without the repacked (interleaved Q4_0/Q8_0) weight buffers:
			// with them llama.cpp aborts building the graph of a file
			// whose Q8_0 tensors feed ops other than matrix products.
			lm, err := lib.LoadModel(path, ModelParams{NoExtraBuffers: true})
			if err != nil {
				t.Fatal(err)
			}
			defer lm.Close()
			V := tm.Cfg.VocabSize
			pl := perplexity(windows, V, func(w []int) []float32 { return peerLogits(t, lm, w, true) })
			st, _ := os.Stat(path)
			// The default integer kernels, and the generic ones (the
			// browser's and other CPUs') where they are not the default.
			sets := ref.Int8Kernels()
			if sets[0] != "go" {
				sets = []string{sets[0], "go"}
			}
			for _, k := range sets {
				if _, err := ref.SetInt8Kernels(k); err != nil {
					t.Fatal(err)
				}
				pt := perplexity(windows, V, func(w []int) []float32 { return tesseraLogits(t, tm, w, true) })
				t.Logf("%-22s %6.2f MiB  tessera (%s) ppl %.4f  llama.cpp ppl %.4f  (%+.3f %%)", f.name, float64(st.Size())/(1<<20), k, pt, pl, 100*(pt/pl-1))
				if math.Abs(pt/pl-1) > 0.01 {
					t.Fatalf("perplexity: tessera (%s kernels) %.4f, llama.cpp %.4f: more than 1 %% apart", k, pt, pl)
				}
			}
		})
	}
}
