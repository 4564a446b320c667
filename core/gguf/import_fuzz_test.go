package gguf

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tessera-llm/tessera/core/model"
)

// FuzzImport feeds mutated GGUF model files (seeded with a random
// kimi-linear-nano in Q4_0) to ImportCheckpoint and model.Load: they must
// return an error or a model, never panic; an imported model's checkpoint
// must hold every tensor the configuration needs.
func FuzzImport(f *testing.F) {
	dir := f.TempDir()
	mdir := makeModel(f, modelSpec{preset: "kimi-linear-nano"})
	p := filepath.Join(dir, "m.gguf")
	if err := Export(mdir, p, ExportOptions{Type: "q4_0", NoVocab: true}); err != nil {
		f.Fatal(err)
	}
	seed, err := os.ReadFile(p)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed)
	f.Fuzz(func(t *testing.T, data []byte) {
		g, err := Parse(bytes.NewReader(data), int64(len(data)), Limits{MaxKVs: 256, MaxTensors: 256, MaxString: 1 << 12, MaxArray: 1 << 12})
		if err != nil {
			return
		}
		cfg, ck, err := ImportCheckpoint(g)
		if err != nil {
			return
		}
		defer ck.Close()
		if cfg.HiddenSize > 4096 || cfg.VocabSize > 1<<16 {
			return // bounded by the file: tensors of that size are not in it
		}
		if _, err := model.Load(cfg, ck); err != nil {
			return
		}
		for _, s := range model.Spec(cfg) {
			if _, ok := ck.Tensor(s.Name); !ok {
				t.Fatalf("loaded model without tensor %s", s.Name)
			}
		}
	})
}
