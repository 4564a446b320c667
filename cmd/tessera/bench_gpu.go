//go:build cgo

package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/cmd/internal/host"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// benchGPU is `tessera bench` on the GPU runner: prefill through the
// session, decode with the argmax taken on the device (one 4-byte readback
// per token, as generation does), the device's copy bandwidth as the
// roofline, dispatches per token and the runner's GPU memory. Per-op times
// are not measured on the GPU (the binding exposes no timestamp queries).
func benchGPU(e *engine.Engine, a benchGPUArgs, stdout, stderr io.Writer) (benchResult, error) {
	res, err := measureGPU(e, a, stdout, stderr)
	if err == nil && a.jsonOut != "" {
		b, _ := json.MarshalIndent(res, "", "  ")
		err = os.WriteFile(a.jsonOut, append(b, '\n'), 0o644)
	}
	return res, err
}

func measureGPU(e *engine.Engine, a benchGPUArgs, stdout, stderr io.Writer) (benchResult, error) {
	r, c := e.GPU, e.GPU.Config()
	bw := a.bandwidth
	if bw == 0 {
		fmt.Fprintf(stderr, "bench: measuring GPU copy bandwidth...\n")
		var err error
		if bw, err = gpuCopyBandwidth(e.Dev); err != nil {
			return benchResult{}, fmt.Errorf("GPU bandwidth: %w", err)
		}
	}
	prompt := make([]int, a.promptLen)
	for i := range prompt {
		prompt[i] = (i*7919 + 1) % c.VocabSize
	}
	var prefill, decode, ttft []float64
	var xs wgsl.ExpertStats // the expert cache over the measured decode steps
	for rep := 0; rep <= a.repeats; rep++ {
		sess, free, err := e.Sequence(a.promptLen + a.gen + 1)
		if err != nil {
			return benchResult{}, err
		}
		free() // the runner stays the engine's; this benchmark drives it alone
		t0 := time.Now()
		if err := sess.Prefill(prompt); err != nil {
			return benchResult{}, err
		}
		tok := generate.Argmax(sess.Logits())
		tPrefill := time.Since(t0)
		x0 := r.ExpertStats()
		t1 := time.Now()
		for i := 0; i < a.gen; i++ {
			if tok, err = r.Greedy([]int{tok}); err != nil {
				return benchResult{}, err
			}
		}
		tDecode := time.Since(t1)
		if rep == 0 {
			continue // warm-up (pipelines compiled, bind groups cached)
		}
		d := r.ExpertStats().Sub(x0)
		xs.Hits, xs.Misses, xs.UploadBytes, xs.UploadTime, xs.Tokens, xs.CPUTime =
			xs.Hits+d.Hits, xs.Misses+d.Misses, xs.UploadBytes+d.UploadBytes, xs.UploadTime+d.UploadTime, xs.Tokens+d.Tokens, xs.CPUTime+d.CPUTime
		prefill = append(prefill, float64(a.promptLen)/tPrefill.Seconds())
		decode = append(decode, float64(a.gen)/tDecode.Seconds())
		ttft = append(ttft, tPrefill.Seconds()*1000)
	}
	res := benchResult{Model: a.dir, Backend: "gpu", Adapter: e.Dev.Info(), PromptLen: a.promptLen, Gen: a.gen, Repeats: a.repeats,
		PrefillTokPerS: median(prefill), DecodeTokPerS: median(decode), TTFTMillis: median(ttft),
		DecodeReadBytes: a.readBytes, MachineGBPerS: bw / 1e9, WeightBytes: a.weightBytes,
		GPUMemory: a.gpuMemory, DispatchesPerToken: r.Stats().Dispatches, SubmitsPerToken: r.Stats().Submits, GPUBytes: r.Bytes(), PeakRSSBytes: peakRSS()}
	if s := r.ExpertStats(); s.Streaming && xs.Tokens > 0 {
		res.ExpertSlots, res.ExpertsPerLayer, res.ExpertHitRate = s.Slots, s.Experts, xs.HitRate()
		res.ExpertUploadBytesPerToken = float64(xs.UploadBytes) / float64(xs.Tokens)
		res.ExpertUploadMsPerToken = float64(xs.UploadTime.Microseconds()) / 1000 / float64(xs.Tokens)
	}
	if s := r.ExpertStats(); s.CPULayers > 0 && xs.Tokens > 0 {
		res.CPUMoELayers = s.CPULayers
		res.ExpertCPUMsPerToken = float64(xs.CPUTime.Microseconds()) / 1000 / float64(xs.Tokens)
	}
	res.DecodeGBPerS = float64(res.DecodeReadBytes) * res.DecodeTokPerS / 1e9
	if res.MachineGBPerS > 0 {
		res.RooflineRatio = res.DecodeGBPerS / res.MachineGBPerS
	}
	w := stdout
	fmt.Fprintf(w, "model            %s (%s)\n", a.dir, c.Summary())
	fmt.Fprintf(w, "backend          gpu: %s\n", res.Adapter)
	fmt.Fprintf(w, "prefill          %.1f tok/s (prompt %d, chunk %d)\n", res.PrefillTokPerS, a.promptLen, a.chunk)
	fmt.Fprintf(w, "time to 1st tok  %.1f ms\n", res.TTFTMillis)
	fmt.Fprintf(w, "decode           %.2f tok/s (%d tokens after the prompt; argmax on the device)\n", res.DecodeTokPerS, a.gen)
	fmt.Fprintf(w, "decode traffic   %s weights per token → %.2f GB/s\n", bytesStr(res.DecodeReadBytes), res.DecodeGBPerS)
	fmt.Fprintf(w, "device           %.2f GB/s (buffer copy) → roofline ratio %.0f%%\n", res.MachineGBPerS, 100*res.RooflineRatio)
	fmt.Fprintf(w, "dispatches       %d per decoded token (%d layers) in %d queue submission(s)\n", res.DispatchesPerToken, c.NumHiddenLayers, res.SubmitsPerToken)
	mem := engine.GPUMemoryOf(r, e.Model)
	res.GPUWeightBytes = mem.Weights
	weights := bytesStr(mem.Weights)
	if mem.Weights != mem.ModelWeights { // streamed or on the CPU: the dense part and the slots are resident
		weights = fmt.Sprintf("%s of the model's %s", weights, bytesStr(mem.ModelWeights))
	}
	fmt.Fprintf(w, "GPU memory       %s in buffers (weights %s, KDA state + MLA caches for %d tokens %s, scratch %s); host peak RSS %s\n",
		bytesStr(res.GPUBytes), weights, r.MaxContext(), bytesStr(mem.State), bytesStr(mem.Scratch), bytesStr(res.PeakRSSBytes))
	if res.ExpertSlots > 0 {
		fmt.Fprintf(w, "expert cache     %d of %d experts per MoE layer on the GPU: hit rate %.1f%%, %s uploaded per decoded token in %.2f ms\n",
			res.ExpertSlots, res.ExpertsPerLayer, 100*res.ExpertHitRate, bytesStr(int64(res.ExpertUploadBytesPerToken)), res.ExpertUploadMsPerToken)
	}
	if res.CPUMoELayers > 0 {
		fmt.Fprintf(w, "experts on CPU   %d MoE layers: %.2f ms per decoded token computing and writing back\n", res.CPUMoELayers, res.ExpertCPUMsPerToken)
	}
	fmt.Fprintf(w, "decode by op     not measured on the GPU backend (no timestamp queries in the binding); see --backend cpu\n")
	if len(a.sweep) > 0 {
		if err := gpuSweep(e, a, &res, w, stderr); err != nil {
			return benchResult{}, err
		}
	}
	return res, nil
}

// gpuSweep is --ctx-sweep on the GPU: for each context length L a runner
// with room for L + gen tokens (its own paged latent caches, so the state
// memory is that of L tokens), the caches filled with the CPU sweep's
// synthetic rows (Runner.FillContext), then gen greedy tokens decoded.
func gpuSweep(e *engine.Engine, a benchGPUArgs, res *benchResult, w, stderr io.Writer) error {
	m := e.Model
	c := m.Cfg
	st := model.ComputeStats(c)
	budget, err := a.budget()
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n%10s %12s %14s %14s %8s %12s\n", "context", "decode tok/s", "GPU state", "analytic", "ratio", "dispatches")
	for _, L := range a.sweep {
		if L+a.gen+1 > c.MaxPositions { // "1M" on a 1M-context model: leave room for --gen
			L = max(0, c.MaxPositions-a.gen-1)
		}
		fmt.Fprintf(stderr, "bench: GPU context %d: filling the latent caches...\n", L)
		r, err := wgsl.NewRunner(e.Dev, m, budget.Options(wgsl.RunnerOptions{MaxChunk: 1, MaxContext: L + a.gen + 1}))
		if err != nil {
			return fmt.Errorf("--ctx-sweep %d on the GPU: %w", L, err)
		}
		pt, disp, err := gpuSweepPoint(r, L, a.gen)
		r.Close()
		if err != nil {
			return fmt.Errorf("--ctx-sweep %d on the GPU: %w", L, err)
		}
		pt.Analytic = st.KDAStateBytes + int64(L+a.gen)*st.CacheBytesPerTok
		res.Sweep = append(res.Sweep, pt)
		fmt.Fprintf(w, "%10d %12.2f %14s %14s %7.3fx %12d\n", L, pt.DecodeTokPerS, bytesStr(pt.StateBytes), bytesStr(pt.Analytic),
			float64(pt.StateBytes)/float64(pt.Analytic), disp)
	}
	return nil
}

// gpuSweepPoint decodes gen tokens on r after FillContext(L) and one
// warm-up token (pipelines, bind groups); it returns
// the speed and state memory, and the dispatches of the last token.
func gpuSweepPoint(r *wgsl.Runner, L, gen int) (sweepResult, int, error) {
	if err := r.FillContext(L, func(_, i int, row []float32) { sweepRow(i, row) }); err != nil {
		return sweepResult{}, 0, err
	}
	tok := 1
	var err error
	if tok, err = r.Greedy([]int{tok}); err != nil { // warm-up: pipelines, bind groups
		return sweepResult{}, 0, err
	}
	t0 := time.Now()
	for i := 0; i < gen; i++ {
		if tok, err = r.Greedy([]int{tok}); err != nil {
			return sweepResult{}, 0, err
		}
	}
	return sweepResult{Context: L, DecodeTokPerS: float64(gen) / time.Since(t0).Seconds(),
		StateBytes: r.StateBytes(), PeakRSS: peakRSS()}, r.Stats().Dispatches, nil
}

// gpuCopyBandwidth measures the device's memory bandwidth in bytes/s with
// a copy kernel between two 64 MiB buffers (read + write counted), the
// best of several passes.
func gpuCopyBandwidth(d *wgsl.Device) (float64, error) {
	const words = 16 << 20
	src, err := d.NewBuffer(words)
	if err != nil {
		return 0, err
	}
	defer src.Release()
	dst, err := d.NewBuffer(words)
	if err != nil {
		return 0, err
	}
	defer dst.Release()
	const rows = 64 // 64 rows of 256 Ki words: modest grids everywhere
	best := 0.0
	for pass := 0; pass < 4; pass++ {
		t0 := time.Now()
		if err := d.Copy(dst.At(0).Rows(words/rows), src.At(0).Rows(words/rows), rows, words/rows); err != nil {
			return 0, err
		}
		if err := d.Sync(); err != nil {
			return 0, err
		}
		if pass == 0 {
			continue // pipeline creation
		}
		if bw := 2 * 4 * float64(words) / time.Since(t0).Seconds(); bw > best {
			best = bw
		}
	}
	return best, nil
}

// budget is the GPU memory budget the benchmark runs under: --gpu-memory,
// else the environment's.
func (a benchGPUArgs) budget() (engine.GPUMemory, error) {
	if a.gpuMemory != "" {
		return engine.ParseGPUMemory(a.gpuMemory)
	}
	return engine.GPUBudget()
}

// benchMemorySweep is --gpu-memory A,B,…: the GPU benchmark once per
// budget, each on an engine opened with it (so a budget below the model
// streams its experts), then decode and prefill tok/s, the expert cache's
// hit rate and upload traffic against the budget: a table with a text
// plot, the JSON, and with --plot a chart.
func benchMemorySweep(budgets []string, o engine.OpenOptions, a benchGPUArgs, plotDir string, stdout, stderr io.Writer) error {
	sw := memorySweep{Model: a.dir, Load: host.LoadAvg()}
	for _, b := range budgets {
		o.GPUMemory = strings.TrimSpace(b)
		e, err := openEngine(a.dir, o, stderr)
		if err != nil {
			return fmt.Errorf("--gpu-memory %s: %w", b, err)
		}
		if e.GPU == nil {
			e.Close()
			return fmt.Errorf("--gpu-memory %s: the model runs on the CPU (%s)", b, e.Backend)
		}
		fmt.Fprintf(stdout, "\n--- --gpu-memory %s\n", o.GPUMemory)
		ga := a.withModel(e)
		ga.jsonOut, ga.gpuMemory = "", o.GPUMemory
		res, err := benchGPU(e, ga, stdout, stderr)
		a.bandwidth = res.MachineGBPerS * 1e9 // the same device each time: measured once
		if s := e.GPU.ExpertStats(); err == nil && !s.Streaming {
			res.ExpertSlots, res.ExpertsPerLayer, res.ExpertHitRate = s.Slots, s.Experts, 1
		}
		e.Close()
		if err != nil {
			return fmt.Errorf("--gpu-memory %s: %w", b, err)
		}
		sw.Adapter = res.Adapter
		sw.Budgets = append(sw.Budgets, res)
	}
	w := stdout
	best := 0.0
	for _, r := range sw.Budgets {
		best = max(best, r.DecodeTokPerS)
	}
	fmt.Fprintf(w, "\nGPU memory sweep: %s on %s (load %s)\n", a.dir, sw.Adapter, sw.Load)
	fmt.Fprintf(w, "%-8s %12s %9s %9s %9s %8s %12s %10s  %s\n", "budget", "GPU", "experts", "prefill", "decode", "hits", "upload/tok", "upload ms", "decode tok/s")
	for _, r := range sw.Budgets {
		bar := ""
		if best > 0 {
			bar = strings.Repeat("#", int(40*r.DecodeTokPerS/best+0.5))
		}
		fmt.Fprintf(w, "%-8s %12s %4d/%-4d %9.1f %9.2f %7.1f%% %12s %10.2f  %s\n", r.GPUMemory, bytesStr(r.GPUBytes), r.ExpertSlots, r.ExpertsPerLayer,
			r.PrefillTokPerS, r.DecodeTokPerS, 100*r.ExpertHitRate, bytesStr(int64(r.ExpertUploadBytesPerToken)), r.ExpertUploadMsPerToken, bar)
	}
	if a.jsonOut != "" {
		b, _ := json.MarshalIndent(sw, "", "  ")
		if err := os.WriteFile(a.jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	if plotDir != "" {
		if err := os.MkdirAll(plotDir, 0o755); err != nil {
			return err
		}
		var xs, dec, pre, hit []float64
		var names []string
		for _, r := range sw.Budgets {
			xs = append(xs, float64(r.GPUBytes)/(1<<20))
			names = append(names, r.GPUMemory)
			dec, pre, hit = append(dec, r.DecodeTokPerS), append(pre, r.PrefillTokPerS), append(hit, 100*r.ExpertHitRate)
		}
		path := filepath.Join(plotDir, "gpu-memory-sweep.png")
		if err := lineChart(path, "tok/s and expert hit rate % vs GPU memory (MiB) - "+filepath.Base(a.dir), "GPU memory (MiB)", xs, names,
			[]plotSeries{{"decode tok/s", dec}, {"prefill tok/s", pre}, {"hit rate %", hit}}); err != nil {
			return err
		}
		fmt.Fprintf(w, "chart            %s\n", path)
	}
	return nil
}
