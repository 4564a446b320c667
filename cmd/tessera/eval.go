package main

import (
	"fmt"
	"io"
	"math"
	"os"

	"github.com/tessera-llm/tessera/core/model"
)

func init() {
	register("eval", "evaluate a model: held-out perplexity (eval ppl)", cmdEval)
}

func cmdEval(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || (args[0] != "ppl") {
		fmt.Fprintln(stderr, "usage: tessera eval ppl --model DIR --file TEXT [--ctx N] [--bos]")
		return fmt.Errorf("eval: want the subcommand ppl: %w", errUsage)
	}
	return cmdEvalPPL(args[1:], stdout, stderr)
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
	lm, err := openModel(*dir)
	if err != nil {
		return err
	}
	defer lm.Close()
	m := lm.m
	if *bos && m.Cfg.BOSTokenID < 0 {
		return fmt.Errorf("--bos: the config has no bos_token_id")
	}
	if *ctx > m.Cfg.MaxPositions {
		return fmt.Errorf("--ctx %d exceeds the model's context of %d", *ctx, m.Cfg.MaxPositions)
	}
	ids, err := lm.codec.Encode(string(text))
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
