package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

func init() {
	register("chat", "interactive chat with a model (its chat template, else the Kimi chat format), streaming; --session FILE keeps it across runs", cmdChat)
}

// chatInput is where the REPL reads from; tests replace it.
var chatInput io.Reader = os.Stdin

func cmdChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "--model DIR [--system TEXT] [--session FILE] [sampling flags]\n\nThe conversation is rendered by the model's chat template (tokenizer_config.json,\nchat_template.jinja or a GGUF's tokenizer.chat_template), else in the built-in Kimi format.\nIn the chat: /image PATH attaches an image to the next message, /prompt shows the\nconversation as the model sees it, /reset, /exit.", stderr)
	dir := fs.String("model", "", "model directory with a tokenizer (tokenizer.json or tiktoken.model)")
	system := fs.String("system", "", "system prompt (default: none, so the template's own default applies; the built-in Kimi format uses \""+tokenizer.DefaultKimiSystemPrompt+"\")")
	maxTok := fs.Int("max-tokens", 512, "maximum new tokens per reply")
	backend := fs.String("backend", "cpu", "cpu, gpu or auto (as in run)")
	gpuMem := fs.String("gpu-memory", "", gpuMemoryHelp)
	nCPUMoE := fs.Int("n-cpu-moe", 0, nCPUMoEHelp)
	exact := fs.Bool("exact", false, exactHelp)
	session := fs.String("session", "", "conversation file: resumed (without prefilling it again) when it exists, saved after every reply")
	cacheSize := fs.String("prefix-cache", "256M", "memory for the states of the conversation so far (bytes, K/M/G suffixes)")
	sf := addSamplingFlags(fs, 0.7, 0.95)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" {
		fs.Usage()
		return fmt.Errorf("need --model: %w", errUsage)
	}
	so, err := sf.options()
	if err != nil {
		return err
	}
	budget, err := engine.ParseBytes(*cacheSize)
	if err != nil || budget <= 0 {
		return fmt.Errorf("--prefix-cache %q: want a positive byte count such as 256M", *cacheSize)
	}
	e, err := openEngine(*dir, engine.OpenOptions{Backend: *backend, MaxContext: 8192, PrefixCache: budget, GPUMemory: *gpuMem, CPUMoELayers: *nCPUMoE, Exact: *exact}, stderr)
	if err != nil {
		return err
	}
	defer e.Close()
	if _, isByte := e.Codec().(tokenizer.ByteCodec); isByte {
		return fmt.Errorf("%s has no tokenizer.json or tiktoken.model: chat needs the model's tokenizer", *dir)
	}
	var first []chat.Message
	if *system != "" {
		first = []chat.Message{{Role: "system", Content: chat.Text(*system)}}
	}
	conv := engine.Conversation{Messages: slices.Clone(first)}
	if *session != "" {
		c, err := e.LoadConversationFile(*session)
		switch {
		case err == nil:
			conv = c
			fmt.Fprintf(stderr, "tessera chat: resumed %d messages from %s\n", len(c.Messages), *session)
		case errors.Is(err, iofs.ErrNotExist):
		default:
			return err
		}
	}
	in := bufio.NewScanner(chatInput)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	fmt.Fprintf(stderr, "tessera chat (%s) — /image PATH attaches an image to your next message, /prompt shows the prompt, /reset clears the conversation, /exit quits\n", e.Chat().Source)
	var pending []engine.Image // images for the next user message
	for {
		fmt.Fprint(stdout, "> ")
		if !in.Scan() {
			fmt.Fprintln(stdout)
			return in.Err()
		}
		line := strings.TrimSpace(in.Text())
		switch {
		case line == "":
			continue
		case line == "/exit" || line == "/quit":
			return nil
		case line == "/reset":
			conv.Messages, conv.Images, pending = slices.Clone(first), nil, nil
			fmt.Fprintln(stdout, "(conversation cleared)")
			continue
		case line == "/prompt":
			text, err := e.Chat().Render(chat.Input{Messages: conv.Messages, AddGenerationPrompt: true})
			if err != nil {
				fmt.Fprintf(stdout, "(%v)\n", err)
				continue
			}
			fmt.Fprintf(stdout, "%s\n", text)
			continue
		case line == "/image" || strings.HasPrefix(line, "/image "):
			path := strings.TrimSpace(strings.TrimPrefix(line, "/image"))
			switch {
			case !e.Model.HasVision():
				fmt.Fprintln(stdout, "(this model has no vision tower: it cannot take images)")
			case path == "":
				fmt.Fprintln(stdout, "(usage: /image PATH)")
			default:
				b, err := os.ReadFile(path)
				if err != nil {
					fmt.Fprintf(stdout, "(%v)\n", err)
					continue
				}
				if _, err := imageio.Probe(b, imageio.Limits{}); err != nil {
					fmt.Fprintf(stdout, "(%s: %v)\n", path, err)
					continue
				}
				pending = append(pending, engine.Image{Data: b})
				fmt.Fprintf(stdout, "(image %d attached to your next message)\n", len(pending))
			}
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(stdout, "(unknown command %s; try /image, /prompt, /reset or /exit)\n", strings.Fields(line)[0])
			continue
		}
		// The whole conversation goes to the engine each turn; the prefix
		// cache holds the state after the last reply, so only the new turn
		// is prefilled (and images already seen are not encoded again).
		msgs := append(conv.Messages, chat.Message{Role: "user", Content: chat.WithImages(len(pending), line)})
		imgs := append(append([]engine.Image(nil), conv.Images...), pending...)
		w := bufio.NewWriter(stdout)
		var reply strings.Builder
		st, err := e.Generate(context.Background(), engine.Options{Chat: &chat.Input{Messages: msgs}, Images: imgs, MaxTokens: *maxTok, Sampler: so},
			func(p engine.Piece) bool {
				reply.WriteString(p.Text)
				w.WriteString(p.Text)
				w.Flush()
				return true
			})
		if err != nil {
			// a request the model cannot take (an image without a vision
			// tower, a template's raise_exception): say so, keep chatting
			if (len(pending) > 0 || errors.Is(err, engine.ErrBadRequest)) && st.Tokens == 0 {
				fmt.Fprintf(stdout, "(%v)\n", err)
				pending = nil
				continue
			}
			return err
		}
		reply.WriteString(st.Tail)
		w.WriteString(st.Tail)
		w.WriteString("\n")
		w.Flush()
		conv.Messages = append(msgs, chat.Message{Role: "assistant", Content: chat.Text(reply.String())})
		conv.Images, pending = imgs, nil
		if *session != "" {
			if err := e.SaveConversationFile(*session, conv); err != nil {
				return err
			}
		}
	}
}
