package main

import (
	"encoding/json"
	"fmt"
	"github.com/tessera-llm/tessera/core/engine"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
)

func init() {
	register("bench", "measure prefill and decode speed, memory and the bandwidth roofline", cmdBench)
}

// benchResult is what `tessera bench --json` writes.
type benchResult struct {
	Model             string        `json:"model"`
	Backend           string        `json:"backend"`
	Threads           int           `json:"threads"`
	PromptLen         int           `json:"prompt_len"`
	Gen               int           `json:"gen"`
	Repeats           int           `json:"repeats"`
	PrefillTokPerS    float64       `json:"prefill_tok_per_s"`
	DecodeTokPerS     float64       `json:"decode_tok_per_s"`
	TTFTMillis        float64       `json:"ttft_ms"`
	DecodeReadBytes   int64         `json:"decode_read_bytes_per_token"`
	DecodeGBPerS      float64       `json:"decode_gb_per_s"`
	MachineGBPerS     float64       `json:"machine_gb_per_s"`
	RooflineRatio     float64       `json:"roofline_ratio"`
	WeightBytes       int64         `json:"weight_bytes"`
	KDAStateBytes     int64         `json:"kda_state_bytes"`
	CacheBytesPerTok  int64         `json:"mla_cache_bytes_per_token"`
	StateBytesAtEnd   int64         `json:"state_bytes_at_end"`
	PeakRSSBytes      int64         `json:"peak_rss_bytes"`
	DecodeAllocsPerTk float64       `json:"decode_allocs_per_token"`
	Sweep             []sweepResult `json:"ctx_sweep,omitempty"`
	// DecodeOps is the decode time per token by op category (ms; CPU).
	DecodeOps map[string]float64 `json:"decode_ms_per_token_by_op,omitempty"`
	// GPU backend: the adapter, compute dispatches per decoded token, and
	// the GPU memory the runner holds.
	Adapter            string `json:"adapter,omitempty"`
	DispatchesPerToken int    `json:"dispatches_per_token,omitempty"`
	SubmitsPerToken    int    `json:"submits_per_token,omitempty"`
	GPUBytes           int64  `json:"gpu_bytes,omitempty"`
	// GPUWeightBytes: the weights resident on the GPU (engine.GPUMemoryUse).
	GPUWeightBytes int64 `json:"gpu_weight_bytes,omitempty"`
	// GPU memory budget (--gpu-memory) and the routed-expert cache over
	// the measured decode steps when experts are streamed.
	GPUMemory                 string  `json:"gpu_memory,omitempty"`
	ExpertSlots               int     `json:"expert_slots,omitempty"`
	ExpertsPerLayer           int     `json:"experts_per_layer,omitempty"`
	ExpertHitRate             float64 `json:"expert_hit_rate,omitempty"`
	ExpertUploadBytesPerToken float64 `json:"expert_upload_bytes_per_token,omitempty"`
	ExpertUploadMsPerToken    float64 `json:"expert_upload_ms_per_token,omitempty"`
	// --n-cpu-moe: MoE layers whose experts run on the CPU, and the time
	// they take per decoded token (readback, compute, write-back).
	CPUMoELayers        int     `json:"cpu_moe_layers,omitempty"`
	ExpertCPUMsPerToken float64 `json:"expert_cpu_ms_per_token,omitempty"`
}

// memorySweep is what `tessera bench --gpu-memory A,B,… --json` writes.
type memorySweep struct {
	Model   string        `json:"model"`
	Adapter string        `json:"adapter"`
	Load    string        `json:"load,omitempty"` // /proc/loadavg when the sweep started
	Budgets []benchResult `json:"gpu_memory_sweep"`
}

// benchGPUArgs are the settings benchGPU measures with.
type benchGPUArgs struct {
	dir                     string
	promptLen, gen, repeats int
	chunk                   int
	weightBytes, readBytes  int64
	jsonOut                 string
	sweep                   []int   // --ctx-sweep context lengths
	gpuMemory               string  // --gpu-memory (one budget)
	bandwidth               float64 // the device's copy bandwidth (B/s) when measured before, else 0
}

// withModel fills in the weight sizes of e's model.
func (a benchGPUArgs) withModel(e *engine.Engine) benchGPUArgs {
	a.weightBytes = e.Info().WeightBytes
	st := model.ComputeStats(e.Cfg)
	a.readBytes = int64(float64(st.DecodeReadParams) * float64(a.weightBytes) / float64(st.TotalParams))
	return a
}

// sweepResult is decode speed and memory at one context length.
type sweepResult struct {
	Context       int     `json:"context"`
	DecodeTokPerS float64 `json:"decode_tok_per_s"`
	StateBytes    int64   `json:"state_bytes"`
	Analytic      int64   `json:"analytic_state_bytes"`
	PeakRSS       int64   `json:"peak_rss_bytes"`
}

// sweepRow fills row i of a latent cache for the context sweeps (the same
// synthetic rows on both backends).
func sweepRow(i int, row []float32) {
	for j := range row {
		row[j] = float32((i*31+j*17)%97)/97 - 0.5
	}
}

// sweepPoint measures decoding gen tokens after a context of L tokens. The
// MLA latent caches are filled with synthetic rows (prefilling a million
// tokens through the naive attention would take hours on a CPU and does
// not change what decode reads); the KDA state is constant-size anyway.
func sweepPoint(r *model.Runner, L, gen int) (sweepResult, error) {
	st := r.M.NewState()
	st.Reserve(L + gen)
	for _, c := range st.Caches {
		if c == nil {
			continue
		}
		row := make([]float32, c.Width())
		for i := 0; i < L; i++ {
			sweepRow(i, row)
			c.Append(row)
		}
	}
	st.N = L
	logits := make([]float32, r.M.Cfg.VocabSize)
	tok := []int{1}
	t0 := time.Now()
	for i := 0; i < gen; i++ {
		if err := r.Forward(st, tok, logits); err != nil {
			return sweepResult{}, err
		}
		tok[0] = generate.Argmax(logits)
	}
	return sweepResult{Context: L, DecodeTokPerS: float64(gen) / time.Since(t0).Seconds(),
		StateBytes: st.Bytes(), PeakRSS: peakRSS()}, nil
}

// parseLengths parses "1k,8k,64k,1M" (k = 1024, M = 1048576).
func parseLengths(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		mul := 1
		switch {
		case strings.HasSuffix(f, "k"), strings.HasSuffix(f, "K"):
			mul, f = 1024, f[:len(f)-1]
		case strings.HasSuffix(f, "M"), strings.HasSuffix(f, "m"):
			mul, f = 1<<20, f[:len(f)-1]
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("--ctx-sweep: %q is not a length like 8k or 1M", f)
		}
		out = append(out, n*mul)
	}
	return out, nil
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "--model DIR [--prompt-len N] [--gen N] [--repeats N] [--json FILE]", stderr)
	dir := fs.String("model", "", "model directory")
	promptLen := fs.Int("prompt-len", 128, "prompt tokens (prefill)")
	gen := fs.Int("gen", 32, "decoded tokens per repeat")
	repeats := fs.Int("repeats", 3, "measured repeats after one warm-up; medians are reported")
	chunk := fs.Int("chunk", 64, "prefill piece size")
	threads := fs.Int("threads", 0, "CPU workers (0: all cores)")
	jsonOut := fs.String("json", "", "also write the results as JSON to this file")
	plotDir := fs.String("plot", "", "write PNG charts (per-op breakdown, context sweep) into this directory")
	backend := fs.String("backend", "cpu", "cpu, gpu or auto (GPU when an adapter is found)")
	cpuProf := fs.String("cpuprofile", "", "write a CPU profile of the run to this file")
	sweep := fs.String("ctx-sweep", "", "comma-separated context lengths (e.g. 1k,8k,64k,1M): decode speed and memory at each; the latent caches are filled with synthetic rows")
	nCPUMoE := fs.Int("n-cpu-moe", 0, nCPUMoEHelp)
	exact := fs.Bool("exact", false, exactHelp)
	gpuMem := fs.String("gpu-memory", "", "GPU memory budget: bytes (512MiB, 6G) or a share of the routed experts (50%); a comma-separated list (100%,50%,25%) sweeps tok/s against budget (default "+engine.GPUMemEnv+")")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		fs.Usage()
		return fmt.Errorf("need --model: %w", errUsage)
	}
	if err := engine.CheckBackend(*backend); err != nil {
		return err
	}
	if *promptLen < 1 || *gen < 1 || *repeats < 1 {
		return fmt.Errorf("--prompt-len, --gen and --repeats must be ≥ 1")
	}
	budgets := strings.Split(*gpuMem, ",")
	for _, b := range budgets {
		if _, err := engine.ParseGPUMemory(b); err != nil && *gpuMem != "" {
			return fmt.Errorf("--gpu-memory: %w", err)
		}
	}
	if (*gpuMem != "" || *nCPUMoE != 0) && *backend == "cpu" {
		return fmt.Errorf("--gpu-memory and --n-cpu-moe split a model between GPU and host: add --backend gpu")
	}
	if *backend != "cpu" && *plotDir != "" && len(budgets) < 2 {
		return fmt.Errorf("--plot measures the CPU backend or a --gpu-memory sweep; drop it or use --backend cpu")
	}
	var lens []int
	if *sweep != "" && *backend != "cpu" {
		var err error
		if lens, err = parseLengths(*sweep); err != nil {
			return err
		}
	}
	oo := engine.OpenOptions{Backend: *backend, Chunk: *chunk, MaxContext: *promptLen + *gen + 1, GPUMemory: budgets[0], CPUMoELayers: *nCPUMoE, Exact: *exact}
	ga := benchGPUArgs{dir: *dir, promptLen: *promptLen, gen: *gen, repeats: *repeats, chunk: *chunk, jsonOut: *jsonOut, sweep: lens, gpuMemory: budgets[0]}
	if len(budgets) > 1 {
		return benchMemorySweep(budgets, oo, ga, *plotDir, stdout, stderr)
	}
	e, err := openEngine(*dir, oo, stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	m := e.Model
	c := m.Cfg
	if *promptLen+*gen > c.MaxPositions {
		return fmt.Errorf("--prompt-len + --gen = %d exceeds the model's context of %d", *promptLen+*gen, c.MaxPositions)
	}
	weightBytes := e.Info().WeightBytes
	st := model.ComputeStats(c)
	bytesPerParam := float64(weightBytes) / float64(st.TotalParams)
	if e.GPU != nil {
		_, err := benchGPU(e, ga.withModel(e), stdout, stderr)
		return err
	}
	// --backend auto without a GPU: the notice is printed; measure the CPU
	if *cpuProf != "" {
		f, err := os.Create(*cpuProf)
		if err != nil {
			return err
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer func() { pprof.StopCPUProfile(); f.Close() }()
	}
	fmt.Fprintf(stderr, "bench: measuring memory bandwidth...\n")
	bw := streamTriad(*threads)
	r := model.NewRunner(m, model.Options{MaxChunk: *chunk, Workers: *threads})
	defer r.Close()
	prompt := make([]int, *promptLen)
	for i := range prompt {
		prompt[i] = (i*7919 + 1) % c.VocabSize
	}
	var prefill, decode, ttft []float64
	var allocs float64
	var stateBytes int64
	for rep := 0; rep <= *repeats; rep++ {
		sess := generate.NewSession(r, *promptLen+*gen+1)
		t0 := time.Now()
		if err := sess.Prefill(prompt); err != nil {
			return err
		}
		tok := generate.Argmax(sess.Logits())
		tPrefill := time.Since(t0)
		var ms0, ms1 runtime.MemStats
		runtime.ReadMemStats(&ms0)
		t1 := time.Now()
		for i := 0; i < *gen; i++ {
			if err := sess.Step(tok); err != nil {
				return err
			}
			tok = generate.Argmax(sess.Logits())
		}
		tDecode := time.Since(t1)
		runtime.ReadMemStats(&ms1)
		if rep == 0 {
			continue // warm-up
		}
		prefill = append(prefill, float64(*promptLen)/tPrefill.Seconds())
		decode = append(decode, float64(*gen)/tDecode.Seconds())
		ttft = append(ttft, tPrefill.Seconds()*1000)
		allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(*gen)
		stateBytes = sess.State().Bytes()
	}
	// One more decode pass with per-op timing (kept out of the medians: the
	// clock reads cost a little).
	prof := &model.Profile{}
	{
		sess := generate.NewSession(r, *promptLen+*gen+1)
		if err := sess.Prefill(prompt); err != nil {
			return err
		}
		r.Profile = prof
		tok := generate.Argmax(sess.Logits())
		for i := 0; i < *gen; i++ {
			if err := sess.Step(tok); err != nil {
				return err
			}
			tok = generate.Argmax(sess.Logits())
		}
		r.Profile = nil
	}
	ops := map[string]float64{}
	var opNames []string
	var opMs []float64
	var accounted time.Duration
	for op := model.Op(0); op < model.NumOps; op++ {
		d := prof.Dur[op]
		if op == model.OpOther {
			d = prof.Total - accounted
		}
		accounted += d
		if d <= 0 {
			continue
		}
		ms := float64(d.Microseconds()) / 1000 / float64(*gen)
		ops[op.String()] = ms
		opNames, opMs = append(opNames, op.String()), append(opMs, ms)
	}
	res := benchResult{DecodeOps: ops,
		Model: *dir, Backend: "cpu", Threads: r.Workers(), PromptLen: *promptLen, Gen: *gen, Repeats: *repeats,
		PrefillTokPerS: median(prefill), DecodeTokPerS: median(decode), TTFTMillis: median(ttft),
		DecodeReadBytes: int64(float64(st.DecodeReadParams) * bytesPerParam),
		MachineGBPerS:   bw / 1e9, WeightBytes: weightBytes, KDAStateBytes: st.KDAStateBytes,
		CacheBytesPerTok: st.CacheBytesPerTok, StateBytesAtEnd: stateBytes, PeakRSSBytes: peakRSS(),
		DecodeAllocsPerTk: allocs,
	}
	res.DecodeGBPerS = float64(res.DecodeReadBytes) * res.DecodeTokPerS / 1e9
	if res.MachineGBPerS > 0 {
		res.RooflineRatio = res.DecodeGBPerS / res.MachineGBPerS
	}
	w := stdout
	fmt.Fprintf(w, "model            %s (%s, %d threads)\n", *dir, c.Summary(), res.Threads)
	fmt.Fprintf(w, "prefill          %.1f tok/s (prompt %d, chunk %d)\n", res.PrefillTokPerS, *promptLen, *chunk)
	fmt.Fprintf(w, "time to 1st tok  %.1f ms\n", res.TTFTMillis)
	fmt.Fprintf(w, "decode           %.2f tok/s (%d tokens after the prompt)\n", res.DecodeTokPerS, *gen)
	fmt.Fprintf(w, "decode traffic   %s weights per token → %.2f GB/s\n", bytesStr(res.DecodeReadBytes), res.DecodeGBPerS)
	fmt.Fprintf(w, "machine          %.2f GB/s (STREAM triad) → roofline ratio %.0f%%\n", res.MachineGBPerS, 100*res.RooflineRatio)
	fmt.Fprintf(w, "memory           weights %s, %s state %s, %s cache %d B/token, state now %s, peak RSS %s\n",
		bytesStr(weightBytes), pick(c.Layout.Kimi(), "KDA", "GDN"), bytesStr(res.KDAStateBytes),
		pick(c.Layout == config.LayoutQwen3Next, "K/V", "MLA"), res.CacheBytesPerTok, bytesStr(stateBytes), bytesStr(res.PeakRSSBytes))
	fmt.Fprintf(w, "allocations      %.2f per decoded token\n", res.DecodeAllocsPerTk)
	fmt.Fprintf(w, "decode by op     ")
	for i, n := range opNames {
		fmt.Fprintf(w, "%s %.3f ms (%.0f%%)  ", n, opMs[i], 100*opMs[i]/(float64(prof.Total.Microseconds())/1000/float64(*gen)))
	}
	fmt.Fprintln(w)
	if *sweep != "" {
		lens, err := parseLengths(*sweep)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "\n%10s %12s %14s %14s %14s\n", "context", "decode tok/s", "state bytes", "analytic", "peak RSS")
		for _, L := range lens {
			if L+*gen > c.MaxPositions { // "1M" on a 1M-context model: leave room for --gen
				L = max(0, c.MaxPositions-*gen)
			}
			pt, err := sweepPoint(r, L, *gen)
			if err != nil {
				return err
			}
			pt.Analytic = st.KDAStateBytes + int64(L+*gen)*st.CacheBytesPerTok
			res.Sweep = append(res.Sweep, pt)
			fmt.Fprintf(w, "%10d %12.2f %14s %14s %14s\n", L, pt.DecodeTokPerS, bytesStr(pt.StateBytes), bytesStr(pt.Analytic), bytesStr(pt.PeakRSS))
		}
	}
	if *plotDir != "" {
		if err := os.MkdirAll(*plotDir, 0o755); err != nil {
			return err
		}
		title := fmt.Sprintf("decode time per token by op (ms) - %s", c.Summary())
		if err := barChart(filepath.Join(*plotDir, "decode-ops.png"), title, opNames, opMs, "ms"); err != nil {
			return err
		}
		if len(res.Sweep) > 1 {
			var xs, tps, mib, an []float64
			var names []string
			for _, p := range res.Sweep {
				xs = append(xs, float64(max(p.Context, 1)))
				names = append(names, tokStr(int64(p.Context)))
				tps = append(tps, p.DecodeTokPerS)
				mib = append(mib, float64(p.StateBytes)/(1<<20))
				an = append(an, float64(p.Analytic)/(1<<20))
			}
			if err := lineChart(filepath.Join(*plotDir, "ctx-sweep.png"), "decode tok/s and state MiB vs context - "+c.Summary(),
				"context (tokens)", xs, names, []plotSeries{{"decode tok/s", tps}, {"state MiB", mib}, {"analytic MiB", an}}); err != nil {
				return err
			}
		}
		fmt.Fprintf(w, "charts           %s\n", *plotDir)
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

func median(x []float64) float64 {
	if len(x) == 0 {
		return 0
	}
	s := append([]float64(nil), x...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// streamTriad measures the machine's memory bandwidth in bytes/s with a
// STREAM-style triad a[i] = b[i] + s·c[i] over arrays far larger than the
// caches, split over the workers; the best of several passes counts 3
// arrays × 4 bytes per element.
func streamTriad(threads int) float64 {
	if threads <= 0 {
		threads = runtime.GOMAXPROCS(0)
	}
	const n = 1 << 24 // 64 MiB per array
	a, b, c := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range b {
		b[i], c[i] = 1, 2
	}
	best := 0.0
	for pass := 0; pass < 5; pass++ {
		var wg sync.WaitGroup
		t0 := time.Now()
		step := n / threads
		for w := 0; w < threads; w++ {
			lo, hi := w*step, (w+1)*step
			if w == threads-1 {
				hi = n
			}
			wg.Add(1)
			go func(lo, hi int) {
				defer wg.Done()
				aa, bb, cc := a[lo:hi], b[lo:hi], c[lo:hi]
				for i := range aa {
					aa[i] = bb[i] + 3*cc[i]
				}
			}(lo, hi)
		}
		wg.Wait()
		if bw := float64(3*4*n) / time.Since(t0).Seconds(); bw > best {
			best = bw
		}
	}
	return best
}

// peakRSS is the process's peak resident set (VmHWM) in bytes, 0 when
// /proc is unavailable.
func peakRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(line, "VmHWM:") {
			f := strings.Fields(line)
			if len(f) >= 2 {
				kb, _ := strconv.ParseInt(f[1], 10, 64)
				return kb * 1024
			}
		}
	}
	return 0
}
