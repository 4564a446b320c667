package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

func init() {
	register("chat", "interactive chat with a model (Kimi chat format), streaming", cmdChat)
}

// chatInput is where the REPL reads from; tests replace it.
var chatInput io.Reader = os.Stdin

func cmdChat(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("chat", "--model DIR [--system TEXT] [sampling flags]", stderr)
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
	fmt.Fprintln(stderr, "tessera chat — /reset clears the conversation, /exit quits")
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
			msgs = msgs[:1]
			if err := sess.Reset(); err != nil {
				return err
			}
			fmt.Fprintln(stdout, "(conversation cleared)")
			continue
		case strings.HasPrefix(line, "/image"):
			fmt.Fprintln(stdout, "(this model has no vision tower: images are not supported yet)")
			continue
		case strings.HasPrefix(line, "/"):
			fmt.Fprintf(stdout, "(unknown command %s; try /reset or /exit)\n", strings.Fields(line)[0])
			continue
		}
		msgs = append(msgs, tokenizer.Message{Role: "user", Content: line})
		ids, err := codec.Encode(tokenizer.RenderKimi(msgs, true))
		if err != nil {
			return err
		}
		// Feed only what the model has not seen: the conversation so far is
		// a prefix of the new rendering; if tokenisation moved a boundary,
		// start the sequence over.
		fed := sess.History()
		delta := ids
		if len(fed) <= len(ids) && slices.Equal(fed, ids[:len(fed)]) {
			delta = ids[len(fed):]
		} else {
			if err := sess.Reset(); err != nil {
				return err
			}
		}
		stream := codec.Stream()
		var reply []int
		w := bufio.NewWriter(stdout)
		for tok, err := range sess.Generate(delta, generate.Options{Sampler: so, MaxTokens: *maxTok, Stop: stop, Vocab: codec.Vocab()}) {
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
