// Command tessera-peer times tessera against llama.cpp (native/llamacpp)
// on the same checkpoint.
//
//	tessera-peer run --engine tessera --model DIR [flags]
//	tessera-peer run --engine llamacpp --gguf FILE [flags]
//	tessera-peer bench [--bf16 DIR [--q8 DIR]] [--gguf FILE,…] [flags]
//	tessera-peer quantize --model DIR --ftype q4_k_m --out FILE.gguf
//
// quantize writes a GGUF with llama.cpp's own quantizer (K-quant mixes,
// MXFP4_MOE), which tessera then loads like any GGUF.
//
// run measures one engine in this process and prints one JSON object: a
// warm-up pass, then prefill of each --prompt-lens length from an empty
// context and greedy decode of --gen tokens after the first prompt. The
// prompt ids are (i·7919 + 1) mod vocab for both engines (as `tessera
// bench`).
//
// bench is the driver `make bench-peers` uses: it exports the GGUF files
// llama.cpp reads from the tessera checkpoints (gguf.Export), adds the
// --gguf files (which both engines load as they are), then for each
// weight type and thread count starts `run` in a fresh process per round,
// alternating engines (tessera, llama.cpp, tessera, …) so neither runs
// while the other's threads are alive (ggml's workers spin), and reports
// medians and the ratio tessera ÷ llama.cpp (tok/s) as a table and JSON.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	tengine "github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/native/llamacpp"
	"github.com/tessera-llm/tessera/wgsl"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintf(os.Stderr, "tessera-peer: %v\n", err)
		os.Exit(1)
	}
}

const usage = `usage:
  tessera-peer run --engine tessera --model DIR [--threads N] [--prompt-lens 64,512] [--gen 128]
  tessera-peer run --engine llamacpp --gguf FILE [--threads N] [--prompt-lens 64,512] [--gen 128]
  tessera-peer bench [--bf16 DIR [--q8 DIR]] [--gguf FILE,…] [--threads 1,2] [--rounds 3] [--json FILE]
  tessera-peer quantize (--model DIR | --gguf FILE) --ftype q4_k_m|q5_k_m|q6_k|mxfp4_moe --out FILE.gguf`

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	switch args[0] {
	case "run":
		return cmdRun(args[1:], stdout, stderr)
	case "bench":
		return cmdBench(args[1:], stdout, stderr)
	case "quantize":
		return cmdQuantize(args[1:], stdout, stderr)
	case "-h", "-help", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	return fmt.Errorf("unknown command %q\n%s", args[0], usage)
}

// RunResult is what `tessera-peer run` prints: one engine, one process.
type RunResult struct {
	Engine  string `json:"engine"`
	Model   string `json:"model"`
	Threads int    `json:"threads"`
	// Prefill is tok/s per prompt length (a fresh context each).
	Prefill map[string]float64 `json:"prefill_tok_per_s"`
	// Decode is tok/s of Gen greedy tokens after the first prompt.
	Decode      float64 `json:"decode_tok_per_s"`
	DecodeAfter int     `json:"decode_after_prompt"`
	Gen         int     `json:"gen"`
	LoadSeconds float64 `json:"load_s"`
	// FirstIDs are the first greedy ids (to see the engines agree or not).
	FirstIDs []int  `json:"first_ids"`
	Detail   string `json:"detail,omitempty"`
	// Dispatches and Submits are tessera's compute dispatches and queue
	// submissions per decoded token (--gpu).
	Dispatches int `json:"dispatches_per_token,omitempty"`
	Submits    int `json:"submits_per_token,omitempty"`
}

// engine is what run needs from either runtime: prefill a prompt into an
// empty context (returning the last logits), step one token, reset.
type engine interface {
	prefill(ids []int) ([]float32, error)
	step(id int) ([]float32, error)
	reset() error
	vocab() int
	close()
}

func parseInts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q: want positive integers separated by commas", s)
		}
		out = append(out, n)
	}
	return out, nil
}

func benchPrompt(n, vocab int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*7919 + 1) % vocab
	}
	return ids
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	fs.SetOutput(stderr)
	eng := fs.String("engine", "", "tessera or llamacpp")
	dir := fs.String("model", "", "tessera model directory (--engine tessera)")
	file := fs.String("gguf", "", "GGUF file (--engine llamacpp)")
	threads := fs.Int("threads", 1, "threads")
	lensArg := fs.String("prompt-lens", "64,512", "prompt lengths to time prefill at")
	gen := fs.Int("gen", 128, "greedy tokens decoded after the first prompt")
	chunk := fs.Int("chunk", 64, "tessera's prefill piece size (its default)")
	libDir := fs.String("llamacpp-dir", "", "llama.cpp library directory (default: native/llamacpp.DefaultDir())")
	noExtra := fs.Bool("no-extra-buffers", false, "llama.cpp without its extra weight buffer types (repacked / AMX weights)")
	gpu := fs.Bool("gpu", false, "run on the GPU: tessera's WebGPU backend, llama.cpp's Vulkan build with every layer offloaded (--llamacpp-dir defaults to the Vulkan build's directory)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	lens, err := parseInts(*lensArg)
	if err != nil {
		return fmt.Errorf("--prompt-lens %w", err)
	}
	if *gen < 1 || *threads < 1 {
		return errors.New("--gen and --threads must be ≥ 1")
	}
	maxLen := 0
	for _, n := range lens {
		maxLen = max(maxLen, n)
	}
	const warmSteps = 4
	nctx := max(maxLen, lens[0]+max(*gen, warmSteps)) + 1
	t0 := time.Now()
	var e engine
	res := RunResult{Engine: *eng, Threads: *threads, Gen: *gen, DecodeAfter: lens[0], Prefill: map[string]float64{}}
	switch *eng {
	case "tessera":
		if *dir == "" {
			return errors.New("--engine tessera needs --model DIR")
		}
		res.Model = *dir
		var d string
		e, d, err = openTessera(*dir, *threads, *chunk, nctx, *gpu)
		res.Detail = d
	case "llamacpp":
		if *file == "" {
			return errors.New("--engine llamacpp needs --gguf FILE")
		}
		res.Model = *file
		var d string
		e, d, err = openLlama(*libDir, *file, *threads, nctx, maxLen, *noExtra, *gpu)
		if *noExtra {
			d += "; extra weight buffers off"
		}
		res.Detail = d
	default:
		return fmt.Errorf("--engine %q: want tessera or llamacpp", *eng)
	}
	if err != nil {
		return err
	}
	defer e.close()
	res.LoadSeconds = time.Since(t0).Seconds()

	// Warm-up: the first prompt and a few decoded tokens, not timed.
	if _, err := e.prefill(benchPrompt(lens[0], e.vocab())); err != nil {
		return err
	}
	for i := 0; i < warmSteps; i++ {
		if _, err := e.step(i); err != nil {
			return err
		}
	}
	for k, n := range lens {
		if err := e.reset(); err != nil {
			return err
		}
		ids := benchPrompt(n, e.vocab())
		t := time.Now()
		logits, err := e.prefill(ids)
		if err != nil {
			return err
		}
		tok := generate.Argmax(logits)
		res.Prefill[strconv.Itoa(n)] = float64(n) / time.Since(t).Seconds()
		if k != 0 {
			continue
		}
		t = time.Now()
		for i := 0; i < *gen; i++ {
			if len(res.FirstIDs) < 16 {
				res.FirstIDs = append(res.FirstIDs, tok)
			}
			l, err := e.step(tok)
			if err != nil {
				return err
			}
			tok = generate.Argmax(l)
		}
		res.Decode = float64(*gen) / time.Since(t).Seconds()
	}
	if t, ok := e.(*tesseraEngine); ok && t.gpu != nil {
		st := t.gpu.Stats()
		res.Dispatches, res.Submits = st.Dispatches, st.Submits
	}
	enc := json.NewEncoder(stdout)
	return enc.Encode(res)
}

// tesseraEngine runs tessera through a generate.Session, as `tessera
// bench` does: the CPU runner, or the WebGPU runner of core/engine (the
// logits read back every step, as llama.cpp's are).
type tesseraEngine struct {
	s    *generate.Session
	n    int
	gpu  *wgsl.Runner
	free func()
}

func openTessera(dir string, threads, chunk, nctx int, gpu bool) (*tesseraEngine, string, error) {
	if gpu {
		e, err := tengine.Open(dir, tengine.OpenOptions{Backend: "gpu", Chunk: chunk, MaxContext: nctx, Quiet: true})
		if err != nil {
			return nil, "", err
		}
		s, free, err := e.Sequence(nctx)
		if err != nil {
			e.Close()
			return nil, "", err
		}
		return &tesseraEngine{s: s, n: e.Cfg.VocabSize, gpu: e.GPU, free: func() { free(); e.Close() }},
			"tessera WebGPU: " + e.Dev.Info(), nil
	}
	m, ck, err := model.OpenDir(dir)
	if err != nil {
		return nil, "", err
	}
	r := model.NewRunner(m, model.Options{MaxChunk: chunk, Workers: threads})
	return &tesseraEngine{s: generate.NewSession(r, nctx), n: m.Cfg.VocabSize, free: func() { r.Close(); ck.Close() }}, "", nil
}

func (t *tesseraEngine) prefill(ids []int) ([]float32, error) {
	if err := t.s.Prefill(ids); err != nil {
		return nil, err
	}
	return t.s.Logits(), nil
}

func (t *tesseraEngine) step(id int) ([]float32, error) {
	if err := t.s.Step(id); err != nil {
		return nil, err
	}
	return t.s.Logits(), nil
}

func (t *tesseraEngine) reset() error { return t.s.Reset() }
func (t *tesseraEngine) vocab() int   { return t.n }

// llamaEngine runs llama.cpp with the exact-comparison settings (flash
// attention off, F32 cache), the prompt in one llama_decode call.
type llamaEngine struct {
	m      *llamacpp.Model
	c      *llamacpp.Context
	logits []float32
}

func openLlama(libDir, file string, threads, nctx, maxPrompt int, noExtra, gpu bool) (*llamaEngine, string, error) {
	p := llamacpp.ModelParams{NoExtraBuffers: noExtra}
	if gpu {
		if libDir == "" {
			libDir = llamacpp.DefaultVulkanDir()
		}
		// ggml's Vulkan backend hides CPU-type devices (llvmpipe) unless
		// devices are listed explicitly.
		if os.Getenv("GGML_VK_VISIBLE_DEVICES") == "" {
			os.Setenv("GGML_VK_VISIBLE_DEVICES", "0")
		}
		p.GPULayers = 999
	}
	lib, err := llamacpp.Open(libDir)
	if err != nil {
		return nil, "", err
	}
	m, err := lib.LoadModel(file, p)
	if err != nil {
		return nil, "", err
	}
	c, err := m.NewContext(llamacpp.ContextParams{NCtx: nctx, NBatch: maxPrompt, NUBatch: maxPrompt, Threads: threads, ThreadsBatch: threads})
	if err != nil {
		m.Close()
		return nil, "", err
	}
	detail := fmt.Sprintf("llama.cpp %s, %s; %s", lib.Commit, m.Desc(), strings.TrimSpace(lib.SystemInfo))
	if gpu {
		detail += fmt.Sprintf("; Vulkan build, every layer offloaded; devices %s", strings.Join(lib.Devices, ", "))
	}
	return &llamaEngine{m: m, c: c}, detail, nil
}

func (l *llamaEngine) prefill(ids []int) ([]float32, error) {
	if err := l.c.Decode(ids, false); err != nil {
		return nil, err
	}
	var err error
	l.logits, err = l.c.Logits(len(ids)-1, l.logits)
	return l.logits, err
}

func (l *llamaEngine) step(id int) ([]float32, error) { return l.prefill([]int{id}) }
func (l *llamaEngine) reset() error                   { l.c.Reset(); return nil }
func (l *llamaEngine) vocab() int                     { return l.m.NVocab() }
func (l *llamaEngine) close()                         { l.c.Close(); l.m.Close() }
func (t *tesseraEngine) close()                       { t.free() }
