package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/cmd/internal/host"
	"github.com/tessera-llm/tessera/core/gguf"
)

// variant is one weight format: tessera's checkpoint and the GGUF of the
// same weights llama.cpp runs.
type variant struct {
	Name    string `json:"name"`
	Tessera string `json:"tessera_model"`
	GGUF    string `json:"gguf"`
	// NoExtraBuffers runs llama.cpp without its extra weight buffers
	// (repacked / AMX weights). At 0ad4a86 on this AMX CPU, an F16 or Q8_0
	// attn_k_b in the AMX buffer aborts building the graph
	// (GGML_ASSERT(*cur_backend_id != -1); `tessera export` now writes that
	// tensor F32), and with it F32 the repacked k3-mini Q8_0 still aborts
	// on the first decode in get_rows (ops.cpp:5138, i01 out of range), so
	// the Q8_0 rounds run without the extra buffers.
	NoExtraBuffers bool `json:"llamacpp_no_extra_buffers"`
}

// Row is one line of the comparison: medians over the rounds.
type Row struct {
	Variant string  `json:"variant"`
	Threads int     `json:"threads"`
	Metric  string  `json:"metric"`
	Tessera float64 `json:"tessera_tok_per_s"`
	Llama   float64 `json:"llamacpp_tok_per_s"`
	// Ratio is Tessera ÷ Llama (above 1: tessera faster).
	Ratio float64 `json:"ratio"`
	// Spread is (max − min) ÷ median of each engine's rounds.
	TesseraSpread float64 `json:"tessera_spread"`
	LlamaSpread   float64 `json:"llamacpp_spread"`
}

// BenchReport is bench's JSON output.
type BenchReport struct {
	Date       string    `json:"date"`
	Host       string    `json:"host"`
	LoadBefore string    `json:"loadavg_before"`
	LoadAfter  string    `json:"loadavg_after"`
	Rounds     int       `json:"rounds"`
	PromptLens []int     `json:"prompt_lens"`
	Gen        int       `json:"gen"`
	Variants   []variant `json:"variants"`
	// Details are each engine's description of itself (library, build,
	// devices, adapter), once each.
	Details []string `json:"details"`
	// GPU is whether both engines ran on the GPU (--gpu).
	GPU      bool        `json:"gpu"`
	Rows     []Row       `json:"rows"`
	Runs     []RunResult `json:"runs"`
	TimedOut []string    `json:"timed_out,omitempty"`
	// Disagree lists the settings where the engines' first greedy ids
	// differ (a fidelity problem, or a near-tie in low precision).
	Disagree []string `json:"first_ids_differ,omitempty"`
	Seconds  float64  `json:"seconds"`
}

// ensureGGUF exports src as a GGUF of type typ unless path exists and is
// newer than src's config.json and weights.
func ensureGGUF(src, path, typ string, stderr io.Writer) error {
	if st, err := os.Stat(path); err == nil {
		fresh := true
		ents, _ := filepath.Glob(filepath.Join(src, "*"))
		for _, e := range ents {
			if es, err := os.Stat(e); err == nil && es.ModTime().After(st.ModTime()) {
				fresh = false
			}
		}
		if fresh {
			return nil
		}
	}
	fmt.Fprintf(stderr, "bench: exporting %s as %s GGUF → %s\n", src, typ, path)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return gguf.Export(src, path, gguf.ExportOptions{Type: typ}) // atomic: no half-written file
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	bf16 := fs.String("bf16", "", "tessera BF16 checkpoint (llama.cpp gets a BF16 GGUF of it)")
	q8 := fs.String("q8", "", "tessera q8 checkpoint made by `tessera quantize` from --bf16 (llama.cpp gets a Q8_0 GGUF of the --bf16 weights)")
	ggufs := fs.String("gguf", "", "comma-separated GGUF files both engines run as they are (e.g. Q4_K_M, MXFP4_MOE made by `tessera-peer quantize`)")
	ggufPlain := fs.Bool("gguf-no-extra-buffers", false, "run llama.cpp on the --gguf files without its extra (repacked / AMX) weight buffers (see variant.NoExtraBuffers)")
	ggufDir := fs.String("gguf-dir", "", "where the GGUF exports go (default: next to --bf16)")
	threadsArg := fs.String("threads", "1,2", "thread counts")
	rounds := fs.Int("rounds", 3, "rounds per engine and setting (each a fresh process), alternating engines")
	lensArg := fs.String("prompt-lens", "64,512", "prompt lengths to time prefill at")
	gen := fs.Int("gen", 128, "greedy tokens decoded after the first prompt")
	jsonOut := fs.String("json", "", "write the report as JSON to this file")
	libDir := fs.String("llamacpp-dir", "", "llama.cpp library directory (default: the CPU build's, or with --gpu the Vulkan build's)")
	gpu := fs.Bool("gpu", false, "both engines on the GPU: tessera's WebGPU backend against llama.cpp's Vulkan build with every layer offloaded, on the same adapter (on a CPU-type adapter such as lavapipe ggml needs GGML_VK_VISIBLE_DEVICES, which run sets to 0 when unset)")
	runTimeout := fs.Duration("run-timeout", 4*time.Minute, "a run taking longer is stopped and left out of the medians (a busy machine can slow ggml's spinning threads 100-fold)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *bf16 == "" && *ggufs == "" {
		return errors.New("bench needs --bf16 DIR or --gguf FILE")
	}
	threads, err := parseInts(*threadsArg)
	if err != nil {
		return fmt.Errorf("--threads %w", err)
	}
	lens, err := parseInts(*lensArg)
	if err != nil {
		return fmt.Errorf("--prompt-lens %w", err)
	}
	if *rounds < 1 {
		return errors.New("--rounds must be ≥ 1")
	}
	if *ggufDir == "" {
		*ggufDir = filepath.Dir(filepath.Clean(*bf16))
	}
	base := filepath.Base(filepath.Clean(*bf16))
	var vs []variant
	if *bf16 != "" {
		vs = append(vs, variant{Name: "bf16", Tessera: *bf16, GGUF: filepath.Join(*ggufDir, base+".bf16.gguf")})
		if err := ensureGGUF(*bf16, vs[0].GGUF, "bf16", stderr); err != nil {
			return err
		}
	}
	if *q8 != "" && *bf16 != "" {
		v := variant{Name: "int8 (q8 / Q8_0)", Tessera: *q8, GGUF: filepath.Join(*ggufDir, base+".q8_0.gguf"), NoExtraBuffers: true}
		if err := ensureGGUF(*bf16, v.GGUF, "q8_0", stderr); err != nil {
			return err
		}
		vs = append(vs, v)
	}
	if *ggufs != "" {
		for _, f := range strings.Split(*ggufs, ",") {
			if _, err := os.Stat(f); err != nil {
				return fmt.Errorf("--gguf: %w", err)
			}
			vs = append(vs, variant{Name: strings.TrimSuffix(filepath.Base(f), ".gguf"), Tessera: f, GGUF: f, NoExtraBuffers: *ggufPlain})
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	rep := BenchReport{Date: time.Now().UTC().Format(time.RFC3339), LoadBefore: host.LoadAvg(), Rounds: *rounds,
		PromptLens: lens, Gen: *gen, Variants: vs, GPU: *gpu,
		Host: fmt.Sprintf("%s/%s, %d CPUs", runtime.GOOS, runtime.GOARCH, runtime.NumCPU())}
	t0 := time.Now()
	common := []string{"--prompt-lens", *lensArg, "--gen", strconv.Itoa(*gen)}
	for _, v := range vs {
		for _, th := range threads {
			var tr, lr []RunResult
			for r := 0; r < *rounds; r++ {
				for _, eng := range []string{"tessera", "llamacpp"} {
					a := append([]string{"run", "--engine", eng, "--threads", strconv.Itoa(th)}, common...)
					if *gpu {
						a = append(a, "--gpu")
					}
					if eng == "tessera" {
						a = append(a, "--model", v.Tessera)
					} else {
						a = append(a, "--gguf", v.GGUF)
						if v.NoExtraBuffers {
							a = append(a, "--no-extra-buffers")
						}
						if *libDir != "" {
							a = append(a, "--llamacpp-dir", *libDir)
						}
					}
					res, err := runChild(self, a, *runTimeout, stderr)
					if errors.Is(err, errTimeout) {
						fmt.Fprintf(stderr, "bench: %-16s %-8s %d thr round %d: stopped after %v (left out)\n", v.Name, eng, th, r+1, *runTimeout)
						rep.TimedOut = append(rep.TimedOut, fmt.Sprintf("%s %s %d threads round %d", v.Name, eng, th, r+1))
						continue
					}
					if err != nil {
						return fmt.Errorf("%s %s, %d threads, round %d: %w", v.Name, eng, th, r+1, err)
					}
					fmt.Fprintf(stderr, "bench: %-16s %-8s %d thr round %d: prefill %v tok/s, decode %.1f tok/s\n",
						v.Name, eng, th, r+1, fmtPrefill(res.Prefill, lens), res.Decode)
					if res.Detail != "" && !slices.Contains(rep.Details, res.Detail) {
						rep.Details = append(rep.Details, res.Detail)
					}
					if eng == "tessera" {
						tr = append(tr, res)
					} else {
						lr = append(lr, res)
					}
					rep.Runs = append(rep.Runs, res)
				}
			}
			if len(tr) > 0 && len(lr) > 0 && !slices.Equal(tr[0].FirstIDs, lr[0].FirstIDs) {
				rep.Disagree = append(rep.Disagree, fmt.Sprintf("%s %d threads: tessera %v, llama.cpp %v", v.Name, th, tr[0].FirstIDs, lr[0].FirstIDs))
			}
			for _, n := range lens {
				key := strconv.Itoa(n)
				rep.Rows = append(rep.Rows, row(v.Name, th, "prefill "+key, tr, lr, func(r RunResult) float64 { return r.Prefill[key] }))
			}
			rep.Rows = append(rep.Rows, row(v.Name, th, fmt.Sprintf("decode %d", *gen), tr, lr, func(r RunResult) float64 { return r.Decode }))
		}
	}
	rep.LoadAfter = host.LoadAvg()
	rep.Seconds = time.Since(t0).Seconds()
	printTable(stdout, &rep)
	if *jsonOut != "" {
		if err := os.MkdirAll(filepath.Dir(*jsonOut), 0o755); err != nil {
			return err
		}
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "wrote %s\n", *jsonOut)
	}
	return nil
}

func fmtPrefill(p map[string]float64, lens []int) string {
	var s []string
	for _, n := range lens {
		s = append(s, fmt.Sprintf("%d: %.1f", n, p[strconv.Itoa(n)]))
	}
	return "[" + strings.Join(s, ", ") + "]"
}

var errTimeout = errors.New("run timed out")

// runChild runs `self args…` in a fresh process and decodes its JSON.
func runChild(self string, args []string, timeout time.Duration, stderr io.Writer) (RunResult, error) {
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Stdout = &out
	cmd.Stderr = stderr
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return RunResult{}, errTimeout
		}
		return RunResult{}, err
	}
	var r RunResult
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		return RunResult{}, fmt.Errorf("decoding %q: %w", out.String(), err)
	}
	return r, nil
}

func medianSpread(x []float64) (float64, float64) {
	if len(x) == 0 {
		return 0, 0
	}
	s := slices.Clone(x)
	slices.Sort(s)
	n := len(s)
	m := s[n/2]
	if n%2 == 0 {
		m = (s[n/2-1] + s[n/2]) / 2
	}
	if m == 0 {
		return 0, 0
	}
	return m, (s[n-1] - s[0]) / m
}

func row(v string, th int, metric string, tr, lr []RunResult, f func(RunResult) float64) Row {
	pick := func(rs []RunResult) []float64 {
		out := make([]float64, len(rs))
		for i, r := range rs {
			out[i] = f(r)
		}
		return out
	}
	tm, ts := medianSpread(pick(tr))
	lm, ls := medianSpread(pick(lr))
	r := Row{Variant: v, Threads: th, Metric: metric, Tessera: tm, Llama: lm, TesseraSpread: ts, LlamaSpread: ls}
	if lm > 0 {
		r.Ratio = tm / lm
	}
	return r
}

func printTable(w io.Writer, rep *BenchReport) {
	fmt.Fprintf(w, "tessera vs llama.cpp, %s, %d rounds each, alternating; load average before %s, after %s; %.0f s\n",
		rep.Host, rep.Rounds, rep.LoadBefore, rep.LoadAfter, rep.Seconds)
	for _, d := range rep.Details {
		fmt.Fprintf(w, "  %s\n", d)
	}
	seen := map[string]bool{}
	for _, r := range rep.Runs {
		if r.Dispatches > 0 && !seen[r.Model] {
			seen[r.Model] = true
			fmt.Fprintf(w, "  tessera on %s: %d dispatches in %d queue submission(s) per decoded token\n", filepath.Base(r.Model), r.Dispatches, r.Submits)
		}
	}
	fmt.Fprintf(w, "%-18s %7s %-12s %14s %14s %8s %18s\n", "weights", "threads", "metric", "tessera tok/s", "llama.cpp tok/s", "ratio", "spread (t / l)")
	for _, r := range rep.Rows {
		fmt.Fprintf(w, "%-18s %7d %-12s %14.1f %14.1f %7.2fx %8.0f%% / %3.0f%%\n",
			r.Variant, r.Threads, r.Metric, r.Tessera, r.Llama, r.Ratio, 100*r.TesseraSpread, 100*r.LlamaSpread)
	}
	for _, s := range rep.Disagree {
		fmt.Fprintf(w, "first greedy ids differ: %s\n", s)
	}
	for _, s := range rep.TimedOut {
		fmt.Fprintf(w, "stopped (left out of the medians): %s\n", s)
	}
}
