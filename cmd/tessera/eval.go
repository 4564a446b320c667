package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/model"
)

func init() {
	register("eval", "evaluate a model: held-out perplexity (eval ppl) and caption accuracy (eval caption)", cmdEval)
}

// cmdEval dispatches to "eval ppl" and "eval caption". Asked for help
// (--help, -h, help) it prints both usages and succeeds like every other
// subcommand's --help; anything else is a usage error.
func cmdEval(args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 {
		switch args[0] {
		case "ppl":
			return cmdEvalPPL(args[1:], stdout, stderr)
		case "caption":
			return cmdEvalCaption(args[1:], stdout, stderr)
		}
	}
	fmt.Fprintln(stderr, "usage: tessera eval ppl --model DIR --file TEXT [--ctx N] [--bos]")
	fmt.Fprintln(stderr, "       tessera eval caption --model DIR --data captions.jsonl [--limit N]")
	fmt.Fprintln(stderr, "\nRun 'tessera eval ppl --help' or 'tessera eval caption --help' for their flags.")
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help", "help":
			return errHelp
		}
		return fmt.Errorf("eval: unknown subcommand %q: want ppl or caption: %w", args[0], errUsage)
	}
	return fmt.Errorf("eval: want the subcommand ppl or caption: %w", errUsage)
}

// captionItem is one line of a captions.jsonl file.
type captionItem struct {
	Image  string `json:"image"` // relative to the file
	Prompt string `json:"prompt"`
	Answer string `json:"answer"`
	Set    string `json:"set"`
}

// cmdEvalCaption measures exact-match accuracy of greedy answers about
// images, per set, as documented in its usage.
func cmdEvalCaption(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval caption", `--model DIR --data captions.jsonl [--limit N] [--backend cpu|gpu|auto] [--predictions FILE]

Accuracy of greedy answers about images. Each line of the JSONL file is
{"image": PATH (relative to the file), "prompt": TEXT, "answer": TEXT, "set": NAME}.
The prompt is the Kimi chat rendering of one user turn holding the image
and the text (default system turn included, generation prompt added); the
image's placeholder is expanded and fused as in run; decoding is greedy;
an answer is correct only when the generated text equals "answer" exactly
and generation ended on <|im_end|> or an eos token (not on --max-tokens).
Accuracy is reported per set and overall.`, stderr)
	dir := fs.String("model", "", "model directory (with a vision tower and a chat tokenizer)")
	data := fs.String("data", "", "captions.jsonl")
	limit := fs.Int("limit", 0, "evaluate at most N items per set (0: all)")
	maxTok := fs.Int("max-tokens", 32, "longest answer generated")
	backend := fs.String("backend", "cpu", "cpu, gpu or auto")
	exact := fs.Bool("exact", false, exactHelp)
	predPath := fs.String("predictions", "", "also write each item with its generated answer to this JSONL file")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *data == "" {
		fs.Usage()
		return fmt.Errorf("need --model and --data: %w", errUsage)
	}
	raw, err := os.ReadFile(*data)
	if err != nil {
		return err
	}
	var items []captionItem
	for i, line := range strings.Split(string(raw), "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		var it captionItem
		if err := json.Unmarshal([]byte(line), &it); err != nil {
			return fmt.Errorf("%s line %d: %w", *data, i+1, err)
		}
		if it.Image == "" || it.Answer == "" {
			return fmt.Errorf("%s line %d: needs image and answer", *data, i+1)
		}
		items = append(items, it)
	}
	e, err := openEngine(*dir, engine.OpenOptions{Backend: *backend, MaxContext: 4096, Exact: *exact}, stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	if !e.Model.HasVision() {
		return fmt.Errorf("%s: the model has no vision tower", *dir)
	}
	var pred *json.Encoder
	if *predPath != "" {
		f, err := os.Create(*predPath)
		if err != nil {
			return err
		}
		defer f.Close()
		pred = json.NewEncoder(f)
	}
	type score struct{ ok, n int }
	sets := map[string]*score{}
	var order []string
	base := filepath.Dir(*data)
	for _, it := range items {
		sc := sets[it.Set]
		if sc == nil {
			sc = &score{}
			sets[it.Set] = sc
			order = append(order, it.Set)
		}
		if *limit > 0 && sc.n >= *limit {
			continue
		}
		img, err := os.ReadFile(filepath.Join(base, it.Image))
		if err != nil {
			return err
		}
		var out []int
		var b strings.Builder
		st, err := e.Generate(context.Background(), engine.Options{Chat: &chat.Input{Messages: []chat.Message{{Role: "user", Content: chat.WithImages(1, it.Prompt)}}},
			Images: []engine.Image{{Data: img}}, MaxTokens: *maxTok, NoCache: true}, func(p engine.Piece) bool {
			out = append(out, p.ID)
			b.WriteString(p.Text)
			return true
		})
		if err != nil {
			return fmt.Errorf("%s: %w", it.Image, err)
		}
		text := b.String() + st.Tail
		sc.n++
		correct := len(out) < *maxTok && text == it.Answer
		if correct {
			sc.ok++
		}
		if pred != nil {
			if err := pred.Encode(struct {
				captionItem
				Output  string `json:"output"`
				Correct bool   `json:"correct"`
			}{it, text, correct}); err != nil {
				return fmt.Errorf("%s: %w", *predPath, err)
			}
		}
	}
	var ok, n int
	for _, name := range order {
		sc := sets[name]
		ok, n = ok+sc.ok, n+sc.n
		fmt.Fprintf(stdout, "%-12s %3d / %3d  %5.1f%%\n", name, sc.ok, sc.n, 100*float64(sc.ok)/float64(max(sc.n, 1)))
	}
	fmt.Fprintf(stdout, "%-12s %3d / %3d  %5.1f%%\n", "all", ok, n, 100*float64(ok)/float64(max(n, 1)))
	return nil
}

// cmdEvalPPL computes perplexity exactly as documented in its usage, so an
// independent implementation can reproduce the number.
func cmdEvalPPL(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("eval ppl", `--model DIR --file TEXT [--ctx N] [--bos]

Perplexity of the text in FILE: the file is tokenized as a whole with the
model's codec, the ids are cut into consecutive windows of --ctx tokens
(the last may be shorter), each window is run from an empty state (with
bos_token_id prepended when --bos), and every token after the first of its
window is scored: PPL = exp(mean over scored tokens of −log p(token | its
window prefix)). Log-softmax in float64 over the full vocabulary.`, stderr)
	dir := fs.String("model", "", "model directory")
	file := fs.String("file", "", "held-out text file")
	ctx := fs.Int("ctx", 512, "window length in tokens")
	bos := fs.Bool("bos", false, "prepend bos_token_id to every window (then its first text token is scored too)")
	chunk := fs.Int("chunk", 64, "prefill piece size (does not change the result)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || *file == "" {
		fs.Usage()
		return fmt.Errorf("need --model and --file: %w", errUsage)
	}
	if *ctx < 2 {
		return fmt.Errorf("--ctx %d: want at least 2 tokens", *ctx)
	}
	text, err := os.ReadFile(*file)
	if err != nil {
		return err
	}
	e, err := openEngine(*dir, engine.OpenOptions{}, stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	m := e.Model
	if *bos && m.Cfg.BOSTokenID < 0 {
		return fmt.Errorf("--bos: the config has no bos_token_id")
	}
	if *ctx > m.Cfg.MaxPositions {
		return fmt.Errorf("--ctx %d exceeds the model's context of %d", *ctx, m.Cfg.MaxPositions)
	}
	ids, err := e.Codec().Encode(string(text))
	if err != nil {
		return err
	}
	if len(ids) < 2 {
		return fmt.Errorf("%s: %d tokens: nothing to score", *file, len(ids))
	}
	r := model.NewRunner(m, model.Options{MaxChunk: *chunk})
	defer r.Close()
	V := m.Cfg.VocabSize
	var nll float64
	scored := 0
	for w0 := 0; w0 < len(ids); w0 += *ctx {
		win := ids[w0:min(len(ids), w0+*ctx)]
		if *bos {
			win = append([]int{m.Cfg.BOSTokenID}, win...)
		}
		if len(win) < 2 {
			continue
		}
		logits := make([]float32, len(win)*V)
		st := m.NewState()
		for i := 0; i < len(win); i += *chunk {
			j := min(len(win), i+*chunk)
			if err := r.Forward(st, win[i:j], logits[i*V:j*V]); err != nil {
				return err
			}
		}
		for t := 0; t+1 < len(win); t++ {
			nll -= logSoftmaxAt(logits[t*V:(t+1)*V], win[t+1])
			scored++
		}
	}
	mean := nll / float64(scored)
	fmt.Fprintf(stdout, "tokens scored  %d (%d windows of ≤ %d)\n", scored, (len(ids)+*ctx-1) / *ctx, *ctx)
	fmt.Fprintf(stdout, "mean NLL       %.6f nats/token\n", mean)
	fmt.Fprintf(stdout, "perplexity     %.4f\n", math.Exp(mean))
	return nil
}

// logSoftmaxAt returns log softmax(x)[i] computed in float64.
func logSoftmaxAt(x []float32, i int) float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, float64(v))
	}
	var s float64
	for _, v := range x {
		s += math.Exp(float64(v) - m)
	}
	return float64(x[i]) - m - math.Log(s)
}
