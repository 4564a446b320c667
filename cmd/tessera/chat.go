package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

func init() {
	register("chat", "interactive chat with a model (Kimi chat format), streaming", cmdChat)
}

// chatInput is where the REPL reads from; tests replace it.
var chatInput io.Reader = os.Stdin

func cmdChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "--model DIR [--system TEXT] [sampling flags]\n\nIn the chat: /image PATH attaches an image to the next message, /reset, /exit.", stderr)
	dir := fs.String("model", "", "model directory with a tokenizer (tokenizer.json or tiktoken.model)")
	system := fs.String("system", tokenizer.DefaultKimiSystemPrompt, "system prompt")
	maxTok := fs.Int("max-tokens", 512, "maximum new tokens per reply")
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
	lm, err := openModel(*dir)
	if err != nil {
		return err
	}
	defer lm.Close()
	m, codec := lm.m, lm.codec
	if _, isByte := codec.(tokenizer.ByteCodec); isByte {
		return fmt.Errorf("%s has no tokenizer.json or tiktoken.model: chat needs the model's tokenizer", *dir)
	}
	stop := append([]int(nil), m.Cfg.EOSTokenIDs...)
	if id, ok := codec.TokenID(tokenizer.KimiEnd); ok {
		stop = append(stop, id)
	}
	r := model.NewRunner(m, model.Options{})
	defer r.Close()
	sess := generate.NewSession(r, 0)
	msgs := []tokenizer.Message{{Role: "system", Content: *system}}
	in := bufio.NewScanner(chatInput)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	fmt.Fprintln(stderr, "tessera chat — /image PATH attaches an image to your next message, /reset clears the conversation, /exit quits")
	var pending [][]byte // images for the next user message
	rendered := ""       // the conversation as fed so far (RenderKimi text)
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
			msgs, pending, rendered = msgs[:1], nil, ""
			if err := sess.Reset(); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "(conversation cleared)")
			continue
		case line == "/image" || strings.HasPrefix(line, "/image "):
			path := strings.TrimSpace(strings.TrimPrefix(line, "/image"))
			switch {
			case m.Vision == nil:
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
				pending = append(pending, b)
				fmt.Fprintf(stdout, "(image %d attached to your next message)\n", len(pending))
			}
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(stdout, "(unknown command %s; try /image, /reset or /exit)\n", strings.Fields(line)[0])
			continue
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: line, Images: len(pending)})
		// Feed only what the model has not seen. The Kimi rendering is a
		// concatenation of turns, so the new text is the rendering's suffix
		// after what was fed: the <|im_end|> that closed the last reply
		// (sampled, never fed), the user turn and the generation prompt.
		// Turns start and end with special tokens, so tokenizing the suffix
		// alone gives the same ids as tokenizing the whole.
		full := tokenizer.RenderKimi(msgs, true)
		deltaText := full
		if rendered != "" {
			deltaText = full[len(rendered)-len(tokenizer.KimiEnd):]
		}
		delta, err := codec.Encode(deltaText)
		if err != nil {
			return err
		}
		var emb []float32
		if len(pending) > 0 {
			if delta, emb, err = generate.Multimodal(r, delta, pending, imageio.Limits{}); err != nil {
				msgs = msgs[:len(msgs)-1]
				fmt.Fprintf(stdout, "(%v)\n", err)
				continue
			}
			pending = nil
		}
		gopt := generate.Options{Sampler: so, MaxTokens: *maxTok, Stop: stop, Vocab: codec.Vocab()}
		seq := sess.Generate(delta, gopt)
		if emb != nil {
			seq = sess.GenerateEmbedded(delta, emb, gopt)
		}
		stream := codec.Stream()
		var reply []int
		w := bufio.NewWriter(stdout)
		for tok, err := range seq {
			if err != nil {
				return err
			}
			reply = append(reply, tok)
			piece, err := stream.Add(tok)
			if err != nil {
				return err
			}
			w.WriteString(piece)
			w.Flush()
		}
		w.WriteString(stream.Flush())
		w.WriteString("\n")
		w.Flush()
		text, _ := codecDecode(codec, reply)
		msgs = append(msgs, tokenizer.Message{Role: "assistant", Content: text})
		rendered = tokenizer.RenderKimi(msgs, false)
	}
}

func codecDecode(c tokenizer.Codec, ids []int) (string, error) {
	s := c.Stream()
	var b strings.Builder
	for _, id := range ids {
		p, err := s.Add(id)
		if err != nil {
			return b.String(), err
		}
		b.WriteString(p)
	}
	b.WriteString(s.Flush())
	return b.String(), nil
}
