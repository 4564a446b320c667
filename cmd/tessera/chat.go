package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

func init() {
	register("chat", "interactive chat with a model (its chat template, else the Kimi chat format), streaming", cmdChat)
}

// chatInput is where the REPL reads from; tests replace it.
var chatInput io.Reader = os.Stdin

func cmdChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "--model DIR [--system TEXT] [sampling flags]\n\nThe conversation is rendered by the model's chat template (tokenizer_config.json,\nchat_template.jinja or a GGUF's tokenizer.chat_template), else in the built-in Kimi format.\nIn the chat: /image PATH attaches an image to the next message, /prompt shows the\nconversation as the model sees it, /reset, /exit.", stderr)
	dir := fs.String("model", "", "model directory with a tokenizer (tokenizer.json or tiktoken.model)")
	system := fs.String("system", "", "system prompt (default: none, so the template's own default applies; the built-in Kimi format uses \""+tokenizer.DefaultKimiSystemPrompt+"\")")
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
	rd, err := loadChat(*dir)
	if err != nil {
		return err
	}
	stop := rd.StopTokens(codec, m.Cfg.EOSTokenIDs)
	r := model.NewRunner(m, model.Options{})
	defer r.Close()
	sess := generate.NewSession(r, 0)
	var first []chat.Message
	if *system != "" {
		first = []chat.Message{{Role: "system", Content: chat.Text(*system)}}
	}
	msgs := slices.Clone(first)
	in := bufio.NewScanner(chatInput)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	fmt.Fprintf(stderr, "tessera chat (%s) — /image PATH attaches an image to your next message, /prompt shows the prompt, /reset clears the conversation, /exit quits\n", rd.Source)
	var pending [][]byte // images for the next user message
	var images [][]byte  // the images of the conversation so far, in order
	fed := ""            // the text the model has seen: renderings fed plus replies
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
			msgs, pending, images, fed = slices.Clone(first), nil, nil, ""
			if err := sess.Reset(); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "(conversation cleared)")
			continue
		case line == "/prompt":
			text, err := rd.Render(chat.Input{Messages: msgs, AddGenerationPrompt: true})
			if err != nil {
				fmt.Fprintf(stdout, "(%v)\n", err)
				continue
			}
			fmt.Fprintf(stdout, "%s\n", text)
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
			fmt.Fprintf(stdout, "(unknown command %s; try /image, /prompt, /reset or /exit)\n", strings.Fields(line)[0])
			continue
		}
		user := chat.Message{Role: "user", Content: chat.Text(line)}
		if len(pending) > 0 {
			var parts []chat.Part
			for range pending {
				parts = append(parts, chat.Part{Type: "image"})
			}
			user.Content = chat.Parts(append(parts, chat.Part{Type: "text", Text: line})...)
		}
		msgs = append(msgs, user)
		full, err := rd.Render(chat.Input{Messages: msgs, AddGenerationPrompt: true})
		if err != nil {
			msgs = msgs[:len(msgs)-1]
			fmt.Fprintf(stdout, "(%v)\n", err)
			continue
		}
		deltaText, reset := chatDelta(fed, full)
		if reset {
			if err := sess.Reset(); err != nil {
				return err
			}
			fed = ""
		}
		delta, err := codec.Encode(deltaText)
		if err != nil {
			return err
		}
		imgs := pending // the images of the text fed now
		if reset {
			imgs = append(slices.Clone(images), pending...)
		}
		var emb []float32
		if len(imgs) > 0 {
			if delta, emb, err = generate.Multimodal(r, delta, imgs, imageio.Limits{}); err != nil {
				msgs = msgs[:len(msgs)-1]
				fmt.Fprintf(stdout, "(%v)\n", err)
				continue
			}
		}
		images, pending = append(images, pending...), nil
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
		msgs = append(msgs, chat.Message{Role: "assistant", Content: chat.Text(text)})
		fed = full + text // every emitted token was fed; the stop token was not
	}
}

// chatDelta returns the text to feed for the next turn given what the
// model has seen (fed) and the new rendering of the conversation (full):
// the rest of full when it extends fed, else all of full with reset set
// (the template rewrote an earlier turn, e.g. dropping a reply's
// reasoning, or closed the last reply differently than the model did).
// Feeding only the rest keeps the model's own tokens of its replies and
// costs only the new turn's tokens.
func chatDelta(fed, full string) (delta string, reset bool) {
	if fed != "" && strings.HasPrefix(full, fed) {
		return full[len(fed):], false
	}
	return full, fed != ""
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
