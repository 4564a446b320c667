package main

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/core/atomicfile"
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

func init() {
	register("run", "generate text from a prompt or token ids", cmdRun)
	register("logits", "write the logits of a token sequence as a .npy file", cmdLogits)
	register("inspect", "summarise a model: parameters, state and cache sizes, memory at long context", cmdInspect)
	register("init-random", "write a random checkpoint for a preset or config.json", cmdInitRandom)
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(s string) error { *l = append(*l, s); return nil }

// parseTokenList parses "1,2,3" (spaces allowed).
func parseTokenList(s string) ([]int, error) {
	var ids []int
	for i, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			return nil, fmt.Errorf("--tokens: empty entry at position %d", i)
		}
		v, err := strconv.Atoi(f)
		if err != nil {
			return nil, fmt.Errorf("--tokens: entry %d %q is not an integer", i, f)
		}
		ids = append(ids, v)
	}
	return ids, nil
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "--model DIR (--prompt TEXT | --tokens 1,2,3) [flags]", stderr)
	dir := fs.String("model", "", "model directory (config.json + safetensors)")
	prompt := fs.String("prompt", "", "prompt text (byte-level fallback when the model has no tokenizer)")
	tokens := fs.String("tokens", "", "prompt as comma-separated token ids")
	maxTok := fs.Int("max-tokens", 64, "maximum number of new tokens")
	sf := addSamplingFlags(fs, 0, 1)
	chunk := fs.Int("chunk", 64, "prefill piece size in tokens")
	backend := fs.String("backend", "cpu", "cpu, gpu (WebGPU: Vulkan/Metal/DX12) or auto (GPU when found, else CPU)")
	gpuMem := fs.String("gpu-memory", "", gpuMemoryHelp)
	nCPUMoE := fs.Int("n-cpu-moe", 0, nCPUMoEHelp)
	exact := fs.Bool("exact", false, exactHelp)
	idsOut := fs.Bool("ids", false, "print generated token ids instead of text")
	var images stringList
	fs.Var(&images, "image", "image file (JPEG, PNG, GIF, WebP) placed before the prompt; repeat for several")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || (*prompt == "") == (*tokens == "") {
		fs.Usage()
		return fmt.Errorf("need --model and exactly one of --prompt or --tokens: %w", errUsage)
	}
	if *maxTok < 0 || *chunk < 1 {
		return fmt.Errorf("--max-tokens must be ≥ 0 and --chunk ≥ 1, got %d and %d", *maxTok, *chunk)
	}
	so, err := sf.options()
	if err != nil {
		return err
	}
	if err := engine.CheckBackend(*backend); err != nil {
		return err
	}
	e, err := openEngine(*dir, engine.OpenOptions{Backend: *backend, Chunk: *chunk, MaxContext: *maxTok + 4096 + 1024*len(images), GPUMemory: *gpuMem, CPUMoELayers: *nCPUMoE, Exact: *exact}, stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	opt := engine.Options{Prompt: *prompt, MaxTokens: *maxTok, Sampler: so}
	if *tokens != "" {
		if opt.Tokens, err = parseTokenList(*tokens); err != nil {
			return err
		}
	}
	for _, p := range images {
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("--image: %w", err)
		}
		opt.Images = append(opt.Images, engine.Image{Data: b})
	}
	if *maxTok == 0 { // until a stop token or the end of the context
		opt.MaxTokens = e.Cfg.MaxPositions
	}
	w := bufio.NewWriter(stdout)
	defer w.Flush()
	st, err := e.Generate(context.Background(), opt, func(p engine.Piece) bool {
		if *idsOut {
			fmt.Fprintf(w, "%d\n", p.ID)
		} else {
			w.WriteString(p.Text)
		}
		w.Flush()
		return true
	})
	if err != nil {
		if len(images) > 0 && !strings.Contains(err.Error(), "--image") {
			return fmt.Errorf("--image: %w", err)
		}
		return err
	}
	if !*idsOut {
		w.WriteString(st.Tail)
		w.WriteString("\n")
	}
	return nil
}

func cmdLogits(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("logits", "--model DIR --tokens 1,2,3 --out FILE.npy [--image PATH]... [--backend cpu]", stderr)
	dir := fs.String("model", "", "model directory")
	tokens := fs.String("tokens", "", "comma-separated token ids")
	out := fs.String("out", "", "output .npy file: float32 logits of shape [T, vocab]")
	chunk := fs.Int("chunk", 64, "prefill piece size in tokens (does not change the result)")
	backend := fs.String("backend", "cpu", "cpu, gpu (WebGPU: Vulkan/Metal/DX12) or auto (GPU when found, else CPU)")
	exact := fs.Bool("exact", false, exactHelp)
	var images stringList
	fs.Var(&images, "image", "image file placed before the tokens as in run (T then counts the image tokens); repeat for several")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *tokens == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("need --model, --tokens and --out: %w", errUsage)
	}
	if *chunk < 1 {
		return fmt.Errorf("--chunk must be ≥ 1, got %d", *chunk)
	}
	ids, err := parseTokenList(*tokens)
	if err != nil {
		return err
	}
	// Image tokens are counted once the images are preprocessed; reserve
	// the context for the worst case like run does.
	e, err := openEngine(*dir, engine.OpenOptions{Backend: *backend, Chunk: *chunk, MaxContext: len(ids) + 1024*len(images), Exact: *exact}, stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	m := e.Model
	if len(ids) > m.Cfg.MaxPositions {
		return fmt.Errorf("%d tokens exceed the model's context of %d", len(ids), m.Cfg.MaxPositions)
	}
	var emb []float32
	if len(images) > 0 {
		var data []engine.Image
		for _, p := range images {
			b, err := os.ReadFile(p)
			if err != nil {
				return fmt.Errorf("--image: %w", err)
			}
			data = append(data, engine.Image{Data: b})
		}
		if ids, emb, err = e.Embed(ids, data); err != nil {
			return fmt.Errorf("--image: %w", err)
		}
		if len(ids) > m.Cfg.MaxPositions {
			return fmt.Errorf("%d tokens with the images exceed the model's context of %d", len(ids), m.Cfg.MaxPositions)
		}
	}
	sess, free, err := e.Sequence(len(ids))
	if err != nil {
		return err
	}
	defer free()
	b := sess.B
	V, d := m.Cfg.VocabSize, m.Cfg.HiddenSize
	logits := make([]float32, len(ids)*V)
	for i := 0; i < len(ids); i += *chunk {
		j := min(len(ids), i+*chunk)
		if emb != nil {
			err = b.ForwardEmbeddings(emb[i*d:j*d], j-i, logits[i*V:j*V])
		} else {
			err = b.Forward(ids[i:j], logits[i*V:j*V])
		}
		if err != nil {
			return err
		}
	}
	return writeNPY(*out, logits, len(ids), V)
}

// writeNPY writes a float32 little-endian C-order array of shape [rows, cols]
// in NumPy .npy format version 1.0. A regular file is written as a
// temporary file next to path and renamed into place, so a failed write
// leaves no partial .npy (and keeps any previous file at path); anything
// else (/dev/stdout, a pipe) is written directly.
func writeNPY(path string, data []float32, rows, cols int) error {
	if rows < 0 || cols < 0 || (cols != 0 && rows > len(data)/cols) || rows*cols != len(data) {
		return fmt.Errorf("writing %s: shape (%d, %d) does not match %d values", path, rows, cols, len(data))
	}
	if st, err := os.Stat(path); err == nil && !st.Mode().IsRegular() {
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return err
		}
		if err := encodeNPY(f, data, rows, cols); err != nil {
			f.Close()
			return fmt.Errorf("writing %s: %w", path, err)
		}
		return f.Close()
	}
	if err := atomicfile.Write(path, 0o644, func(w io.Writer) error { return encodeNPY(w, data, rows, cols) }); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// encodeNPY writes the .npy header and data of a [rows, cols] float32 array.
func encodeNPY(out io.Writer, data []float32, rows, cols int) error {
	hdr := fmt.Sprintf("{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }", rows, cols)
	pad := 64 - (10+len(hdr)+1)%64
	if pad == 64 {
		pad = 0
	}
	hdr += strings.Repeat(" ", pad) + "\n"
	w := bufio.NewWriter(out)
	w.WriteString("\x93NUMPY\x01\x00")
	binary.Write(w, binary.LittleEndian, uint16(len(hdr)))
	w.WriteString(hdr)
	var b [4]byte
	for _, v := range data {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		w.Write(b[:])
	}
	return w.Flush()
}

func cmdInspect(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("inspect", "[--speed] [--ctx N] DIR_OR_GGUF", stderr)
	speed := fs.Bool("speed", false, "time this CPU's decode products for the model's weight types and estimate its decode tok/s from them (about two seconds)")
	ctxArg := fs.Int64("ctx", 4096, "with --speed: the context the estimate reads the MLA cache for (tokens)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return fmt.Errorf("need exactly one model directory: %w", errUsage)
	}
	dir := fs.Arg(0)
	loaded, ck, err := model.OpenDir(dir)
	if err != nil {
		return err
	}
	defer ck.Close()
	cfg := loaded.Cfg
	if *ctxArg < 1 {
		return fmt.Errorf("--ctx %d: want a positive number of tokens: %w", *ctxArg, errUsage)
	}
	needs, err := model.CheckHeader(cfg, ck)
	if err != nil {
		return err
	}
	var weightBytes int64
	dtypes := map[string]int64{}
	for _, n := range ck.Names() {
		t, _ := ck.Tensor(n)
		weightBytes += t.Size
		dt := string(t.DType)
		if cfg.Quant == "mxfp4" && (strings.HasSuffix(n, ".weight_packed") || strings.HasSuffix(n, ".weight_scale")) {
			dt = "MXFP4" // compressed-tensors codes and scales
		}
		dtypes[dt] += t.Size
	}
	s := needs.Stats
	w := stdout
	fmt.Fprintf(w, "model        %s\n", dir)
	fmt.Fprintf(w, "architecture %s\n", cfg.Summary())
	inspectMixers(w, cfg)
	if cfg.Vision != nil {
		m, err := model.Load(cfg, ck)
		if err == nil && m.VisionCfg != nil {
			vc := m.VisionCfg
			n, _ := vc.TokensPerImage(448, 448)
			fmt.Fprintf(w, "vision       %d layers × %d, patch %d, %dx%d merge, %d tokens for a 448×448 image, placeholder id %d\n",
				vc.Layers, vc.Hidden, vc.PatchSize, vc.MergeH, vc.MergeW, n, cfg.MediaPlaceholderTokenID)
		}
	}
	fmt.Fprintf(w, "residuals    %s\n", pick(cfg.AttnResBlockSize > 0, fmt.Sprintf("Block AttnRes, block %d layers", cfg.AttnResBlockSize), "pre-norm"))
	vis := ""
	if s.VisionParams > 0 {
		vis = fmt.Sprintf(" (vision tower %s)", human(s.VisionParams))
	}
	fmt.Fprintf(w, "parameters   %s total%s, %s active per text token\n", human(s.TotalParams), vis, human(s.ActiveParams))
	fmt.Fprintf(w, "weights      %s on disk %v\n", bytesStr(weightBytes), dtypes)
	var byType []string
	for _, t := range needs.DecodeTypes() {
		byType = append(byType, fmt.Sprintf("%v %s", t, bytesStr(needs.Decode[t])))
	}
	fmt.Fprintf(w, "decode read  %s of weights per token (%s)\n", bytesStr(needs.DecodeBytes()), strings.Join(byType, ", "))
	fmt.Fprintf(w, "%s state    %s (constant in context)\n", pick(cfg.Layout.Kimi(), "KDA", "GDN"), bytesStr(s.KDAStateBytes))
	fmt.Fprintf(w, "%s cache    %d B per token\n", pick(cfg.Layout == config.LayoutQwen3Next, "K/V", "MLA"), s.CacheBytesPerTok)
	fmt.Fprintf(w, "context      %d tokens\n", cfg.MaxPositions)
	for _, n := range []int64{8 << 10, 128 << 10, 1 << 20} {
		total := weightBytes + s.KDAStateBytes + n*s.CacheBytesPerTok
		fmt.Fprintf(w, "memory @%-5s weights + state + cache = %s\n", tokStr(n), bytesStr(total))
	}
	if *speed {
		p := ref.NewPool(0)
		defer p.Close()
		e := model.EstimateDecode(needs, cfg.HiddenSize, p, *ctxArg, 200*time.Millisecond)
		var rates []string
		for _, pr := range e.Probes {
			if pr.Measured {
				rates = append(rates, fmt.Sprintf("%v %.1f GB/s", pr.Type, pr.Rate/1e9))
			}
		}
		fmt.Fprintf(w, "speed        decode up to %.1f tok/s at a %s-token context on this CPU (%d threads; the weight products alone, streaming %s; measured in %.1f s)\n",
			e.TokPerSec, tokStr(*ctxArg), p.Workers(), strings.Join(rates, ", "), e.Took.Seconds())
	}
	return nil
}

// inspectMixers prints the token mixers and the FFN of cfg's family.
func inspectMixers(w io.Writer, cfg *config.Config) {
	rope := fmt.Sprintf("RoPE θ %g", cfg.RopeTheta)
	if y := cfg.RopeScaling; y != nil {
		rope += fmt.Sprintf(", YaRN ×%g of %d", y.Factor, y.OriginalMaxPositions)
	}
	switch cfg.Layout {
	case config.LayoutQwen3Next:
		fmt.Fprintf(w, "GDN          %d key / %d value heads × %d / %d, conv %d\n", cfg.LinearKeyHeads, cfg.LinearValueHeads,
			cfg.LinearKeyHeadDim, cfg.LinearValueHeadDim, cfg.ConvKernel)
		fmt.Fprintf(w, "attention    %d heads (%d K/V) × %d, %s on %d dims, output gate\n", cfg.NumHeads, cfg.NumKVHeads, cfg.HeadDim, rope, cfg.RotaryDim)
		fmt.Fprintf(w, "MoE          %d experts top-%d (softmax) + gated shared expert width %d, width %d, SiLU-GLU\n",
			cfg.NumExperts, cfg.TopK, cfg.SharedExpertIntermediateSize, cfg.MoEIntermediateSize)
		return
	case config.LayoutDeepSeekV3:
		fmt.Fprintf(w, "MLA          %d heads, q_lora %d, kv_lora %d, nope %d + rope %d (%s), v %d\n",
			cfg.NumHeads, cfg.QLoraRank, cfg.KVLoraRank, cfg.QKNopeHeadDim, cfg.QKRopeHeadDim, rope, cfg.VHeadDim)
		fmt.Fprintf(w, "MoE          %d experts top-%d (sigmoid, %d groups keep %d) + %d shared, width %d, SiLU-GLU, first %d layers dense\n",
			cfg.NumExperts, cfg.TopK, cfg.NumExpertGroup, cfg.TopKGroup, cfg.NumSharedExperts, cfg.MoEIntermediateSize, cfg.FirstKDenseReplace)
		return
	}
	fmt.Fprintf(w, "KDA          %d heads × %d, conv %d, gate %s, output gate %s\n", cfg.KDAHeads, cfg.KDAHeadDim, cfg.ConvKernel,
		pick(cfg.GateBounded, fmt.Sprintf("lower-bounded sigmoid (%g)", cfg.GateLowerBound), "softplus"), pick(cfg.FullRankGate, "full rank", "low rank"))
	fmt.Fprintf(w, "MLA          %d heads, q_lora %d, kv_lora %d, nope %d + rope %d (NoPE), v %d, output gate %v\n",
		cfg.NumHeads, cfg.QLoraRank, cfg.KVLoraRank, cfg.QKNopeHeadDim, cfg.QKRopeHeadDim, cfg.VHeadDim, cfg.MLAOutputGate)
	fmt.Fprintf(w, "MoE          %d experts top-%d + %d shared, width %d, %s, %s\n", cfg.NumExperts, cfg.TopK, cfg.NumSharedExperts,
		cfg.MoEIntermediateSize, pick(cfg.RoutedExpertHiddenSize > 0, fmt.Sprintf("LatentMoE ℓ=%d", cfg.RoutedExpertHiddenSize), "plain"),
		pick(cfg.SiTU, "SiTU-GLU", "SiLU-GLU"))
}

func pick(c bool, a, b string) string {
	if c {
		return a
	}
	return b
}

func human(n int64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.1f K", float64(n)/1e3)
	}
	return strconv.FormatInt(n, 10)
}

func bytesStr(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.2f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// tokStr writes a token count: 8K, 1M, or the number where it is no
// whole number of either.
func tokStr(n int64) string {
	switch {
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dM", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dK", n>>10)
	}
	return strconv.FormatInt(n, 10)
}

func cmdInitRandom(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("init-random", "--config PRESET_OR_FILE --out DIR [--seed N] [--layout kimi_linear|kimi_k3] [--dtype f32|f16|bf16] [--quant q8] | --quant q8_0|q4_0|q4_k|mxfp4 --out FILE.gguf", stderr)
	cfgArg := fs.String("config", "", "preset name ("+strings.Join(presets.Names(), ", ")+") or a config.json path")
	out := fs.String("out", "", "output directory")
	seed := fs.Uint64("seed", 1, "random seed")
	layoutArg := fs.String("layout", "", "kimi_linear or kimi_k3 (default: as the config says)")
	dtArg := fs.String("dtype", "f32", "weight dtype: f32, f16 or bf16")
	shard := fs.Int64("shard-bytes", 0, "split into shards of at most this many bytes (0: one file)")
	quant := fs.String("quant", "", "q8: int8 linear weights with per-row scales (compressed-tensors format); mxfp4 into a directory: MXFP4 routed experts (compressed-tensors, as Kimi K3 ships them); q8_0, q4_0, q4_k or mxfp4 with --out FILE.gguf: a GGUF file in llama.cpp's layout")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *cfgArg == "" || *out == "" {
		fs.Usage()
		return fmt.Errorf("need --config and --out: %w", errUsage)
	}
	raw, err := presets.Read(*cfgArg)
	if err != nil {
		return err
	}
	cfg, err := config.Parse(raw)
	if err != nil {
		return fmt.Errorf("--config %s: %w", *cfgArg, err)
	}
	layout := cfg.Layout
	if *layoutArg != "" {
		if layout, err = config.ParseLayout(*layoutArg); err != nil {
			return fmt.Errorf("--layout: %w", err)
		}
		if !cfg.Layout.Kimi() {
			return fmt.Errorf("--layout %s: a %s config is written in its own Hugging Face layout (--layout chooses between the Kimi family's two): %w", *layoutArg, cfg.Layout, errUsage)
		}
	}
	var dt safetensors.DType
	switch strings.ToLower(*dtArg) {
	case "f32":
		dt = "F32"
	case "f16":
		dt = "F16"
	case "bf16":
		dt = "BF16"
	default:
		return fmt.Errorf("--dtype %q: want f32, f16 or bf16", *dtArg)
	}
	ggufType := ""
	switch q := strings.ToLower(*quant); q {
	case "q8":
		if !cfg.Layout.Kimi() {
			return fmt.Errorf("--quant q8: int8 (compressed-tensors) checkpoints are supported for the Kimi family only, not %s; use a GGUF type (q8_0, q4_0, q4_k)", cfg.Layout)
		}
	case "":
	case "mxfp4":
		if !strings.HasSuffix(strings.ToLower(*out), ".gguf") {
			if !cfg.Layout.Kimi() {
				return fmt.Errorf("--quant mxfp4 into a directory: compressed-tensors MXFP4 checkpoints are supported for the Kimi family only, not %s; --out FILE.gguf writes a GGUF", cfg.Layout)
			}
			break // compressed-tensors MXFP4 experts (model.QuantizeMXFP4)
		}
		ggufType = q
	case "q8_0", "q4_0", "q4_k":
		ggufType = q
	default:
		return fmt.Errorf("--quant %q: want q8, q8_0, q4_0, q4_k or mxfp4", *quant)
	}
	if ggufType != "" {
		if !strings.HasSuffix(strings.ToLower(*out), ".gguf") {
			return fmt.Errorf("--quant %s writes a GGUF file: --out must end in .gguf, got %q", ggufType, *out)
		}
		tmp, err := os.MkdirTemp(filepath.Dir(*out), ".init-random-*")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		args := []string{"--config", *cfgArg, "--out", tmp, "--seed", fmt.Sprint(*seed), "--dtype", *dtArg}
		if *layoutArg != "" {
			args = append(args, "--layout", *layoutArg)
		}
		if err := cmdInitRandom(args, io.Discard, stderr); err != nil {
			return err
		}
		if err := gguf.Export(tmp, *out, gguf.ExportOptions{Type: ggufType, Name: "random-" + *cfgArg}); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s: %s, layout %s, %s weights (GGUF)\n", *out, cfg.Summary(), layout, strings.ToUpper(ggufType))
		return nil
	}
	cfg.Layout = layout
	ts, err := model.RandomCheckpoint(cfg, *seed, dt)
	if err != nil {
		return err
	}
	switch strings.ToLower(*quant) {
	case "q8":
		ts = model.QuantizeQ8(cfg, ts)
	case "mxfp4":
		if ts, err = model.QuantizeMXFP4(cfg, ts); err != nil {
			return err
		}
	}
	js, err := cfg.Marshal(layout)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(*out, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(*out, "config.json"), js, 0o644); err != nil {
		return err
	}
	meta := map[string]string{"format": "pt", "generator": fmt.Sprintf("tessera init-random seed=%d", *seed)}
	if err := safetensors.WriteDir(*out, ts, meta, *shard); err != nil {
		return err
	}
	s := model.ComputeStats(cfg)
	fmt.Fprintf(stdout, "wrote %s: %s, %s parameters (%s active), layout %s, %s\n", *out, cfg.Summary(), human(s.TotalParams), human(s.ActiveParams), layout, dt)
	return nil
}
