package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tessera-llm/tessera/cmd/tessera/internal/api"
	"github.com/tessera-llm/tessera/core/engine"
)

func init() {
	register("bench-serve", "benchmark the OpenAI-compatible API: requests/s and TTFT at several concurrencies, prefix cache on and off", cmdBenchServe)
}

// serveBenchRow is one (cache, concurrency) measurement.
type serveBenchRow struct {
	PrefixCache  bool    `json:"prefixCache"`
	Concurrency  int     `json:"concurrency"`
	Requests     int     `json:"requests"`
	ReqPerS      float64 `json:"requestsPerS"`
	TTFTP50Ms    float64 `json:"ttftP50Ms"`
	TTFTP95Ms    float64 `json:"ttftP95Ms"`
	TokPerS      float64 `json:"completionTokPerS"`
	PromptTokens int     `json:"promptTokens"` // per request
	CachedShare  float64 `json:"cachedShare"`  // prompt tokens resumed from the cache
}

func cmdBenchServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench-serve", "--model DIR [--concurrency 1,4,16] [--requests N] [--max-tokens N] [--system-words N] [--parallel N] [--json FILE]", stderr)
	dir := fs.String("model", "", "model directory")
	backend := fs.String("backend", "cpu", "cpu, gpu or auto")
	conc := fs.String("concurrency", "1,4,16", "comma-separated numbers of clients at once")
	requests := fs.Int("requests", 0, "requests per concurrency level (0: 2 × concurrency, at least 8)")
	maxTok := fs.Int("max-tokens", 32, "max_tokens of each request")
	sysWords := fs.Int("system-words", 300, "words in the system prompt all requests share")
	parallel := fs.Int("parallel", 4, "the server's --parallel")
	cache := fs.String("prefix-cache", "256M", "the prefix cache's size in the cache-on rounds")
	jsonOut := fs.String("json", "", "also write the rows as JSON")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		fs.Usage()
		return fmt.Errorf("need --model: %w", errUsage)
	}
	levels, err := parseLengths(*conc)
	if err != nil {
		return fmt.Errorf("--concurrency: %w", err)
	}
	cacheBytes, err := engine.ParseBytes(*cache)
	if err != nil || cacheBytes <= 0 {
		return fmt.Errorf("--prefix-cache %q: want a positive size", *cache)
	}
	if *maxTok < 1 || *parallel < 1 || *requests < 0 || *sysWords < 0 {
		return fmt.Errorf("--max-tokens and --parallel must be ≥ 1: %w", errUsage)
	}
	words := strings.Fields("you are a careful assistant who answers questions about the weather the sea the mountains and the history of small towns")
	var sys strings.Builder
	for i := 0; i < *sysWords; i++ {
		sys.WriteString(words[i%len(words)])
		sys.WriteByte(' ')
	}
	var rows []serveBenchRow
	fmt.Fprintf(stdout, "%-6s %6s %8s %8s %12s %12s %10s %8s %8s\n", "cache", "conc", "requests", "req/s", "TTFT p50 ms", "TTFT p95 ms", "tok/s", "prompt", "cached")
	for _, on := range []bool{false, true} {
		o := engine.OpenOptions{Backend: *backend, Parallel: *parallel, MaxContext: 8192}
		if on {
			o.PrefixCache = cacheBytes
		}
		e, err := openEngine(*dir, o, stderr)
		if err != nil {
			return err
		}
		a := api.New(e, api.Config{ModelID: "bench", MaxBody: 1 << 20, MaxQueue: 1 << 10, Context: 8192, MaxOutput: *maxTok})
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			e.Close()
			return err
		}
		srv := &http.Server{Handler: a}
		go srv.Serve(ln)
		url := "http://" + ln.Addr().String() + "/v1/chat/completions"
		// one request first: the cache-on rounds start with the shared
		// prompt cached, as a server that has been up a while has it
		if _, err := benchRequest(url, sys.String(), "warm up", *maxTok); err != nil {
			srv.Close()
			e.Close()
			return err
		}
		for _, c := range levels {
			n := *requests
			if n == 0 {
				n = max(8, 2*c)
			}
			row, err := benchLevel(url, sys.String(), c, n, *maxTok)
			if err != nil {
				srv.Close()
				e.Close()
				return err
			}
			row.PrefixCache = on
			rows = append(rows, row)
			fmt.Fprintf(stdout, "%-6s %6d %8d %8.2f %12.1f %12.1f %10.1f %8d %7.0f%%\n", map[bool]string{true: "on", false: "off"}[on], c, n,
				row.ReqPerS, row.TTFTP50Ms, row.TTFTP95Ms, row.TokPerS, row.PromptTokens, 100*row.CachedShare)
		}
		srv.Close()
		e.Close()
	}
	if *jsonOut != "" {
		b, _ := json.MarshalIndent(rows, "", "  ")
		if err := os.WriteFile(*jsonOut, append(b, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// serveMeasure is what one streamed request measured.
type serveMeasure struct {
	ttft                   time.Duration
	tokens, prompt, cached int
}

// benchLevel sends n requests from c clients at once.
func benchLevel(url, sys string, c, n, maxTok int) (serveBenchRow, error) {
	jobs := make(chan int)
	var mu sync.Mutex
	var res []serveMeasure
	var firstErr error
	var wg sync.WaitGroup
	t0 := time.Now()
	for range c {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				r, err := benchRequest(url, sys, fmt.Sprintf("Question %d: what is the weather like in town %d today?", i, i*7), maxTok)
				mu.Lock()
				if err != nil && firstErr == nil {
					firstErr = err
				}
				res = append(res, r)
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	wall := time.Since(t0)
	if firstErr != nil {
		return serveBenchRow{}, firstErr
	}
	var ttft []float64
	tokens, prompt, cached := 0, 0, 0
	for _, r := range res {
		ttft = append(ttft, float64(r.ttft.Microseconds())/1000)
		tokens, prompt, cached = tokens+r.tokens, prompt+r.prompt, cached+r.cached
	}
	slices.Sort(ttft)
	return serveBenchRow{Concurrency: c, Requests: n, ReqPerS: float64(n) / wall.Seconds(), TTFTP50Ms: ttft[len(ttft)/2],
		TTFTP95Ms: ttft[min(len(ttft)-1, len(ttft)*95/100)], TokPerS: float64(tokens) / wall.Seconds(),
		PromptTokens: prompt / n, CachedShare: float64(cached) / float64(max(prompt, 1))}, nil
}

// benchRequest streams one chat completion and measures its time to the
// first token.
func benchRequest(url, sys, user string, maxTok int) (serveMeasure, error) {
	var r serveMeasure
	body, _ := json.Marshal(map[string]any{"model": "bench", "stream": true, "max_tokens": maxTok, "temperature": 0,
		"stream_options": map[string]any{"include_usage": true},
		"messages":       []map[string]string{{"role": "system", "content": sys}, {"role": "user", "content": user}}})
	t0 := time.Now()
	resp, err := http.Post(url, "application/json", bytes.NewReader(body))
	if err != nil {
		return r, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return r, fmt.Errorf("bench-serve: HTTP %d: %s", resp.StatusCode, b)
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ch struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
			Usage *api.Usage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &ch); err != nil {
			return r, err
		}
		if len(ch.Choices) > 0 && ch.Choices[0].Delta.Content != nil && *ch.Choices[0].Delta.Content != "" && r.ttft == 0 {
			r.ttft = time.Since(t0)
		}
		if ch.Usage != nil {
			r.tokens, r.prompt, r.cached = ch.Usage.CompletionTokens, ch.Usage.PromptTokens, ch.Usage.PromptTokensDetails.CachedTokens
		}
	}
	if r.ttft == 0 {
		r.ttft = time.Since(t0)
	}
	return r, sc.Err()
}
