package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
)

func init() {
	register("quantize", "write a quantized copy of a model: int8 (q8) or MXFP4-expert safetensors, or a GGUF with --type q8_0|q4_0|q4_k|mxfp4", cmdQuantize)
}

func cmdQuantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quantize", "--model DIR --out DIR [--type mxfp4] [--shard-bytes N] | --model DIR --type q8_0|q4_0|q4_k|mxfp4 --out FILE.gguf", stderr)
	dir := fs.String("model", "", "model directory (F32, F16 or BF16 weights)")
	out := fs.String("out", "", "output directory (safetensors), or GGUF file (FILE.gguf with --type)")
	shard := fs.Int64("shard-bytes", 0, "split into shards of at most this many bytes (0: one file)")
	typ := fs.String("type", "", "weight type: q8_0, q4_0, q4_k or mxfp4 write a GGUF in llama.cpp's layout when --out ends in .gguf (mxfp4: MXFP4 experts, Q8_0 elsewhere); "+
		"mxfp4 with an --out directory writes compressed-tensors safetensors as Kimi K3 ships them (MXFP4 routed experts, the rest as it is); empty: int8 (q8) safetensors")
	noVocab := fs.Bool("no-vocab", false, "with --type: write an id-only vocabulary")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("need --model and --out: %w", errUsage)
	}
	kind := strings.ToLower(*typ)
	switch kind {
	case "", "q8_0", "q4_0", "q4_k", "mxfp4":
	default:
		return fmt.Errorf("--type %q: want q8_0, q4_0, q4_k or mxfp4 (K-quant mixes such as Q4_K_M: llama.cpp's quantizer, tessera-peer quantize)", *typ)
	}
	toGGUF := strings.HasSuffix(strings.ToLower(*out), ".gguf")
	if kind != "" && kind != "mxfp4" && !toGGUF {
		return fmt.Errorf("--type %s writes a GGUF file: --out must end in .gguf, got %q (safetensors output: --type mxfp4, or no --type for int8)", kind, *out)
	}
	if kind != "" && toGGUF {
		if err := gguf.Export(*dir, *out, gguf.ExportOptions{Type: *typ, NoVocab: *noVocab}); err != nil {
			return err
		}
		st, err := os.Stat(*out)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: %s weights, %s\n", *out, strings.ToUpper(*typ), bytesStr(st.Size()))
		return nil
	}
	if abs1, _ := filepath.Abs(*dir); abs1 != "" {
		if abs2, _ := filepath.Abs(*out); abs1 == abs2 {
			return fmt.Errorf("--out must differ from --model")
		}
	}
	cfg, err := config.Load(*dir)
	if err != nil {
		return err
	}
	if cfg.Quant != "" {
		return fmt.Errorf("%s is already quantized (%s)", *dir, cfg.Quant)
	}
	scheme := "q8"
	if kind == "mxfp4" {
		scheme = "mxfp4"
	}
	if !cfg.Layout.Kimi() {
		return fmt.Errorf("%s: %s (compressed-tensors) checkpoints are supported for the Kimi family only, not %s; --type q8_0, q4_0, q4_k or mxfp4 with --out FILE.gguf writes a GGUF", *dir, scheme, cfg.Layout)
	}
	ck, err := safetensors.OpenDir(*dir)
	if err != nil {
		return fmt.Errorf("%s: %w", *dir, err)
	}
	defer ck.Close()
	if _, err := model.Load(cfg, ck); err != nil { // validate before converting
		return fmt.Errorf("%s: %w", *dir, err)
	}
	var ts []safetensors.WriteTensor
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		v, err := ck.Float32(n)
		if err != nil {
			return err
		}
		ts = append(ts, safetensors.WriteTensor{Name: n, DType: t.DType, Shape: t.Shape, Data: v})
	}
	if scheme == "mxfp4" {
		if ts, err = model.QuantizeMXFP4(cfg, ts); err != nil {
			return fmt.Errorf("%s: %w", *dir, err)
		}
	} else {
		ts = model.QuantizeQ8(cfg, ts)
	}
	js, err := cfg.Marshal(cfg.Layout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "config.json"), js, 0o644); err != nil {
		return err
	}
	if err := safetensors.WriteDir(*out, ts, map[string]string{"format": "pt", "quantized_by": "tessera quantize (" + scheme + ")"}, *shard); err != nil {
		return err
	}
	// Everything else of the model directory (tokenizer, card) comes along.
	ents, err := os.ReadDir(*dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || n == "config.json" || strings.HasSuffix(n, ".safetensors") || n == "model.safetensors.index.json" || n == "model.manifest.json" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(*dir, n))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(*out, n), b, 0o644); err != nil {
			return err
		}
	}
	var before, after int64
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		before += t.Size
	}
	for _, t := range ts {
		after += int64(len(t.Data)) * int64(dtypeBytes(t.DType))
	}
	fmt.Fprintf(stdout, "wrote %s: weights %s → %s (%s)\n", *out, bytesStr(before), bytesStr(after), scheme)
	return nil
}

func dtypeBytes(d safetensors.DType) int {
	switch d {
	case "F32":
		return 4
	case "I8", "U8":
		return 1
	}
	return 2
}
