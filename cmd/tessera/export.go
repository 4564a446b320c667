package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/core/gguf"
)

func init() {
	register("export", "write a model as a GGUF file for llama.cpp / Ollama", cmdExport)
}

func cmdExport(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("export", "--model DIR --out FILE.gguf [--format gguf] [--type f32|f16|bf16|q8_0|q4_0|q4_k|mxfp4] [--no-vocab]", stderr)
	dir := fs.String("model", "", "model directory (config.json + safetensors)")
	out := fs.String("out", "", "output file")
	format := fs.String("format", "gguf", "output format (gguf)")
	typ := fs.String("type", "f16", "weight type: f32, f16, bf16, q8_0, q4_0, q4_k or mxfp4 (vectors, norms and the router stay f32)")
	noVocab := fs.Bool("no-vocab", false, "write an id-only vocabulary even when the model has a tokenizer.json")
	name := fs.String("name", "", "general.name (default: the model directory's name)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("need --model and --out: %w", errUsage)
	}
	if *format != "gguf" {
		return fmt.Errorf("--format %q: only gguf is supported", *format)
	}
	if st, err := os.Stat(*out); err == nil && st.IsDir() {
		return fmt.Errorf("--out %s is a directory; give a file name such as %s", *out, filepath.Join(*out, "model.gguf"))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	err := gguf.Export(*dir, *out, gguf.ExportOptions{Type: strings.ToLower(*typ), NoVocab: *noVocab, Name: *name, Context: ctx})
	if errors.Is(err, context.Canceled) {
		return fmt.Errorf("interrupted; nothing was written to %s", *out)
	}
	if err != nil {
		return err
	}
	f, err := gguf.Open(*out)
	if err != nil {
		return fmt.Errorf("reading back %s: %w", *out, err)
	}
	defer f.Close()
	st, err := os.Stat(*out)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "wrote %s: %s, %d tensors, %s (%s)\n", *out, f.Architecture(), len(f.Tensors), bytesStr(st.Size()), strings.ToLower(*typ))
	return nil
}
