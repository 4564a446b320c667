package main

import (
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// eval ppl equals the perplexity computed from `tessera logits` by hand, for
// one window and for several.
func TestEvalPPL(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	code, _, errs := tessera(t, "init-random", "--config", "k3-nano", "--out", dir)
	require.Zero(t, code, errs)
	text := "the quick brown fox jumps over the lazy dog"
	f := filepath.Join(t.TempDir(), "held.txt")
	require.NoError(t, os.WriteFile(f, []byte(text), 0o644))
	ids := make([]string, len(text))
	for i := range text {
		ids[i] = strconv.Itoa(int(text[i]))
	}
	npy := filepath.Join(t.TempDir(), "l.npy")
	// Expected NLL for windows of ctx tokens, from the logits of each window.
	expect := func(ctx int) float64 {
		var nll float64
		n := 0
		for w0 := 0; w0 < len(ids); w0 += ctx {
			win := ids[w0:min(len(ids), w0+ctx)]
			code, _, errs := tessera(t, "logits", "--model", dir, "--tokens", strings.Join(win, ","), "--out", npy)
			require.Zero(t, code, errs)
			l, _ := readNPY(t, npy)
			V := len(l) / len(win)
			for i := 0; i+1 < len(win); i++ {
				next, _ := strconv.Atoi(win[i+1])
				nll -= logSoftmaxAt(l[i*V:(i+1)*V], next)
				n++
			}
		}
		return math.Exp(nll / float64(n))
	}
	for _, ctx := range []int{len(text), 10} {
		code, out, errs := tessera(t, "eval", "ppl", "--model", dir, "--file", f, "--ctx", strconv.Itoa(ctx), "--chunk", "7")
		require.Zero(t, code, errs)
		var got float64
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "perplexity") {
				_, err := fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "perplexity")), "%g", &got)
				require.NoError(t, err)
			}
		}
		require.InEpsilon(t, expect(ctx), got, 1e-4, "ctx %d", ctx)
	}
	code, _, errs = tessera(t, "eval", "ppl", "--model", dir, "--file", f, "--ctx", "1")
	require.Equal(t, 1, code)
	require.Contains(t, errs, "--ctx 1")
	code, _, _ = tessera(t, "eval", "nope")
	require.Equal(t, 2, code)
}

// tessera's own evaluation of the shipped k3-micro reproduces the PyTorch
// reference's numbers in models/k3-micro/eval/results.json (same items,
// same prompts): caption accuracy per set within 0.5 points, perplexity
// within 0.5 %.
func TestEvalMatchesReference(t *testing.T) {
	dir := filepath.Join("..", "..", "models", "k3-micro")
	raw, err := os.ReadFile(filepath.Join(dir, "eval", "results.json"))
	require.NoError(t, err, "the shipped k3-micro's reference evaluation is committed with it")
	var ref struct {
		Caption map[string]struct {
			Correct, Total int
			Accuracy       float64
		}
		PPL struct {
			PPL    float64 `json:"ppl"`
			Window int     `json:"window"`
		}
	}
	require.NoError(t, json.Unmarshal(raw, &ref))
	limit := 0
	for _, s := range ref.Caption {
		limit = max(limit, s.Total)
	}
	pred := filepath.Join(t.TempDir(), "pred.jsonl")
	code, out, errs := tessera(t, "eval", "caption", "--model", dir, "--data", filepath.Join(dir, "eval", "captions.jsonl"),
		"--limit", strconv.Itoa(limit), "--predictions", pred)
	require.Zero(t, code, errs)
	// --predictions: one line per item evaluated, correct exactly when the
	// output equals the answer, and the counts agree with the table.
	pr, err := os.ReadFile(pred)
	require.NoError(t, err)
	right := map[string]int{}
	for _, line := range strings.Split(strings.TrimSpace(string(pr)), "\n") {
		var p struct {
			Set, Answer, Output string
			Correct             bool
		}
		require.NoError(t, json.Unmarshal([]byte(line), &p), line)
		require.Equal(t, p.Answer == p.Output, p.Correct, line)
		if p.Correct {
			right[p.Set]++
		}
	}
	for name, s := range ref.Caption {
		require.InDelta(t, s.Correct, right[name], float64(s.Total)/200, "set %s in --predictions", name)
	}
	for name, s := range ref.Caption {
		var ok, n int
		var acc float64
		found := false
		for _, line := range strings.Split(out, "\n") {
			f := strings.Fields(line)
			if len(f) > 0 && f[0] == name {
				_, err := fmt.Sscanf(line[len(name):], " %d / %d %g%%", &ok, &n, &acc)
				require.NoError(t, err, line)
				found = true
			}
		}
		require.True(t, found, "set %s in:\n%s", name, out)
		require.Equal(t, s.Total, n, name)
		require.InDelta(t, s.Accuracy, acc, 0.5, "set %s: tessera %d/%d, PyTorch %d/%d", name, ok, n, s.Correct, s.Total)
	}
	code, out, errs = tessera(t, "eval", "ppl", "--model", dir, "--file", filepath.Join(dir, "eval", "heldout.txt"),
		"--ctx", strconv.Itoa(ref.PPL.Window))
	require.Zero(t, code, errs)
	var ppl float64
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "perplexity") {
			fmt.Sscanf(strings.TrimSpace(strings.TrimPrefix(line, "perplexity")), "%g", &ppl)
		}
	}
	require.InEpsilon(t, ref.PPL.PPL, ppl, 0.005)
}

// The shipped k3-micro captions the held-out scene `make run` shows
// correctly (the demo must convince).
func TestRunCaptionsHeldOutScene(t *testing.T) {
	dir := filepath.Join("..", "..", "models", "k3-micro")
	code, out, errs := tessera(t, "run", "--model", dir, "--image", filepath.Join(dir, "eval", "scenes", "020.png"),
		"--prompt", "Describe the image.", "--max-tokens", "16")
	require.Zero(t, code, errs)
	require.Equal(t, "four large green squares", strings.TrimSpace(out))
}
