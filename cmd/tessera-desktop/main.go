// Command tessera-desktop is tessera's native desktop app: an ebiten window
// that runs a model with the same Go core as `tessera run`, streams the
// text, and shows a live view inside the model — expert routing per MoE
// layer over the last tokens (with the load Quantile Balancing trains
// every expert to), the KDA state norms, the MLA cache size and the
// backend that ran each step.
//
//	tessera-desktop --model DIR [--prompt TEXT] [--image FILE] [flags]
//	tessera-desktop --model DIR --script FILE [--screenshot OUT.png]
//
// Scripted mode opens the script's image, types its prompt, waits for the
// generation to finish, saves a PNG screenshot of the window and prints the
// generated text on stdout exactly as `tessera run` would, then exits.
//
// Keys: Enter sends (Shift+Enter: new line), Esc stops, Ctrl+O opens an
// image by path (or drop a file on the window), Ctrl+L clears the prompt.
//
// Models run on the CPU backend until the WebGPU whole-model runner (wgsl/)
// is wired in; the window says so.
package main

import (
	"errors"
	"flag"
	"fmt"
	"github.com/tessera-llm/tessera/cmd/tessera-desktop/internal/desk"
	_ "github.com/tessera-llm/tessera/cmd/tessera-desktop/internal/display" // before ebiten: a clear error without X
	"github.com/tessera-llm/tessera/core/tokenizer"
	"io"
	"os"
	"strings"
	"time"

	"github.com/tessera-llm/tessera/core/engine"
)

func main() {
	if err := run(os.Args[1:], os.Stdout, os.Stderr); err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "tessera-desktop:", err)
		}
		os.Exit(1)
	}
}

// options are the parsed command line.
type options struct {
	model, prompt, image string
	script, screenshot   string
	backend              string
	chunk, window        int
	timeout              time.Duration
	settings             desk.Settings
}

// parseArgs parses the command line.
func parseArgs(args []string, stderr io.Writer) (*options, error) {
	fs := flag.NewFlagSet("tessera-desktop", flag.ContinueOnError)
	fs.SetOutput(stderr)
	o := &options{settings: desk.DefaultSettings()}
	fs.StringVar(&o.model, "model", "", "model directory (config.json + safetensors)")
	fs.StringVar(&o.prompt, "prompt", "", "initial prompt text")
	fs.StringVar(&o.image, "image", "", "initial image (PNG or JPEG)")
	fs.StringVar(&o.script, "script", "", "scripted mode: JSON file with prompt, image, max_tokens and sampling; prints the text and exits")
	fs.StringVar(&o.screenshot, "screenshot", "", "scripted mode: PNG file for the window screenshot (default: the script's \"screenshot\", else tessera-desktop.png)")
	fs.StringVar(&o.backend, "backend", "auto", "cpu, gpu or auto (auto falls back to the CPU)")
	fs.IntVar(&o.chunk, "chunk", 64, "prefill piece size in tokens (as tessera run --chunk)")
	fs.IntVar(&o.window, "window", 64, "live view: routing heatmap over the last N tokens")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "scripted mode: give up after this long")
	s := &o.settings
	temp := fs.Float64("temperature", 0, "sampling temperature (0: greedy)")
	fs.IntVar(&s.Sampler.TopK, "top-k", 0, "keep the K most likely tokens (0: all)")
	topP := fs.Float64("top-p", 1, "nucleus sampling mass")
	minP := fs.Float64("min-p", 0, "drop tokens below min-p × the top probability")
	rep := fs.Float64("repetition-penalty", 1, "penalty for tokens already seen (1: off)")
	fs.Uint64Var(&s.Sampler.Seed, "seed", 1, "random seed")
	fs.IntVar(&s.MaxTokens, "max-tokens", 64, "maximum number of new tokens")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tessera-desktop --model DIR [--prompt TEXT] [--image FILE] [--script FILE [--screenshot OUT.png]] [flags]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return nil, err
	}
	if fs.NArg() > 0 {
		return nil, fmt.Errorf("unexpected argument %q (flags come as --name value)", fs.Arg(0))
	}
	if o.model == "" {
		fs.Usage()
		return nil, errors.New("--model DIR is required")
	}
	if o.chunk <= 0 {
		return nil, fmt.Errorf("--chunk %d: want > 0", o.chunk)
	}
	if o.window <= 0 || o.window > 1<<16 {
		return nil, fmt.Errorf("--window %d: want 1–65536", o.window)
	}
	if s.MaxTokens < 0 {
		return nil, fmt.Errorf("--max-tokens %d: want ≥ 0", s.MaxTokens)
	}
	s.Sampler.Temperature, s.Sampler.TopP, s.Sampler.MinP, s.Sampler.RepetitionPenalty = float32(*temp), float32(*topP), float32(*minP), float32(*rep)
	if err := s.Sampler.Validate(); err != nil {
		return nil, err
	}
	if o.screenshot != "" && o.script == "" {
		return nil, errors.New("--screenshot needs --script")
	}
	return o, nil
}

// openBackend opens the model on backend "cpu", "gpu" (the WebGPU
// runner, forced) or "auto" (core/engine's choice: the GPU when
// wgsl.ChooseAuto takes its adapter and the runner starts, else the CPU),
// after the engine's memory check. What was chosen and why goes to stderr
// in one line and into the header's notice.
func openBackend(name, dir string, chunk int, stderr io.Writer) (desk.Backend, *engine.Engine, error) {
	e, err := engine.Open(dir, engine.OpenOptions{Backend: name, Chunk: chunk, Log: stderr})
	if err != nil {
		return nil, nil, err
	}
	notice := "CPU backend"
	switch {
	case e.GPU != nil:
		notice = "WebGPU · " + e.Dev.Info()
	case strings.Contains(e.Backend, "; "):
		notice = "CPU backend · " + strings.SplitN(e.Backend, "; ", 2)[1]
	}
	return desk.NewBackend(e, notice), e, nil
}

// run is the whole program.
func run(args []string, stdout, stderr io.Writer) error {
	o, err := parseArgs(args, stderr)
	if err != nil {
		return err
	}
	var sc *desk.Script
	if o.script != "" {
		if sc, err = desk.LoadScript(o.script); err != nil {
			return err
		}
		if o.settings, err = sc.Settings(o.settings); err != nil {
			return err
		}
		o.prompt, o.image = sc.Prompt, sc.Image
		if o.screenshot == "" {
			o.screenshot = sc.Screenshot
		}
		if o.screenshot == "" {
			o.screenshot = "tessera-desktop.png"
		}
	}
	b, e, err := openBackend(o.backend, o.model, o.chunk, stderr)
	if err != nil {
		return err
	}
	defer b.Close()
	m, codec := e.Model, e.Codec()
	live := engine.NewLiveView(m.Cfg, o.window, 160)
	ctl := desk.NewController(b, codec, live, append([]int(nil), m.Cfg.EOSTokenIDs...))
	a := &app{opt: o, ctl: ctl, live: live, backend: b, codec: codec, modelDir: o.model, script: sc != nil}
	if err := runWindow(a); err != nil {
		ctl.Stop()
		ctl.Wait()
		return err
	}
	if sc != nil {
		st := ctl.Status(-1)
		if st.Err != nil {
			return fmt.Errorf("generation: %w", st.Err)
		}
		if _, err := io.WriteString(stdout, ctl.Output()); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "tessera-desktop: %d prompt + %d generated tokens, TTFT %s, %.1f tokens/s; screenshot %s\n",
			st.Prompt, st.Generated, st.TTFT.Round(time.Millisecond), st.TokPerSec, o.screenshot)
	}
	return nil
}

// app is the state shared by the window and the command line.
type app struct {
	opt      *options
	ctl      *desk.Controller
	live     *engine.LiveView
	backend  desk.Backend
	codec    tokenizer.Codec
	modelDir string
	script   bool
	// ui is the window's state (gui.go); nil until the window opens.
	ui *ui
}
