package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/native/llamacpp"
)

// cmdQuantize writes a GGUF quantized by llama.cpp's own quantizer
// (llama_model_quantize: Q4_K_M, Q5_K_M, Q6_K, MXFP4_MOE, …) from a tessera
// model directory (exported to F32 first) or from a GGUF file.
func cmdQuantize(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("quantize", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dir := fs.String("model", "", "tessera model directory (exported to an F32 GGUF first)")
	in := fs.String("gguf", "", "input GGUF file (instead of --model)")
	out := fs.String("out", "", "output GGUF file")
	ftype := fs.String("ftype", "q4_k_m", "llama.cpp file type: q4_k_m, q5_k_m, q6_k, mxfp4_moe, q8_0, q4_0, f16, bf16")
	threads := fs.Int("threads", 0, "quantizer threads (0: all cores)")
	libDir := fs.String("lib", "", "llama.cpp library directory (default: the peer cache)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ft, ok := llamacpp.FTypes[strings.ToLower(*ftype)]
	if !ok {
		return fmt.Errorf("--ftype %q: want q4_k_m, q5_k_m, q6_k, mxfp4_moe, q8_0, q4_0, f16 or bf16", *ftype)
	}
	if *out == "" || (*dir == "") == (*in == "") {
		return fmt.Errorf("need --out and exactly one of --model and --gguf")
	}
	lib, err := llamacpp.Open(*libDir)
	if err != nil {
		return err
	}
	src := *in
	if *dir != "" {
		tmp, err := os.MkdirTemp(filepath.Dir(*out), ".quantize-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		src = filepath.Join(tmp, "f32.gguf")
		if err := gguf.Export(*dir, src, gguf.ExportOptions{Type: "f32"}); err != nil {
			return err
		}
	}
	if err := lib.Quantize(src, *out, ft, *threads); err != nil {
		return err
	}
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d bytes\n", *out, strings.ToUpper(*ftype), st.Size())
	return nil
}
