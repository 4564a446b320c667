package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/tokenizer"
)

func init() {
	register("tokenize", "print the token ids of a text", cmdTokenize)
	register("detokenize", "print the text of token ids", cmdDetokenize)
}

// cmdTokenize implements:
//
//	tessera tokenize --tokenizer PATH (--text S | --file F) [--json]
//
// It prints the ids comma-separated without spaces and a newline, or a JSON
// array and a newline with --json. Special tokens in the text are
// recognised.
func cmdTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", "--tokenizer PATH (--text S | --file F) [--json]", stderr)
	tokPath := fs.String("tokenizer", "", "tokenizer.json, tiktoken.model, or a model directory holding one")
	text := fs.String("text", "", "the text to tokenise")
	file := fs.String("file", "", "read the text to tokenise from this file (exact bytes)")
	asJSON := fs.Bool("json", false, "print a JSON array instead of comma-separated ids")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	textSet, fileSet := false, false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "text":
			textSet = true
		case "file":
			fileSet = true
		}
	})
	switch {
	case fs.NArg() > 0:
		return fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	case *tokPath == "":
		return errors.New("--tokenizer is required")
	case textSet && fileSet:
		return errors.New("give either --text or --file, not both")
	case !textSet && !fileSet:
		return errors.New("one of --text or --file is required")
	}
	input := *text
	if fileSet {
		data, err := os.ReadFile(*file)
		if err != nil {
			return fmt.Errorf("--file: %w", err)
		}
		input = string(data)
	}
	tok, err := tokenizer.Load(*tokPath)
	if err != nil {
		return err
	}
	ids := tok.Encode(input)
	if *asJSON {
		if ids == nil {
			ids = []int{}
		}
		out, err := json.Marshal(ids)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(stdout, "%s\n", out)
		return err
	}
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = strconv.Itoa(id)
	}
	_, err = fmt.Fprintln(stdout, strings.Join(parts, ","))
	return err
}

// cmdDetokenize implements:
//
//	tessera detokenize --tokenizer PATH --ids 1,2,3
//
// It prints exactly the decoded text followed by a single newline.
func cmdDetokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("detokenize", "--tokenizer PATH --ids 1,2,3\n\nPrints exactly the decoded text followed by one newline.", stderr)
	tokPath := fs.String("tokenizer", "", "tokenizer.json, tiktoken.model, or a model directory holding one")
	idList := fs.String("ids", "", "comma-separated token ids (spaces allowed), e.g. 9707,1879,0")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (flags only)", fs.Arg(0))
	}
	if *tokPath == "" {
		return errors.New("--tokenizer is required")
	}
	ids, err := parseIDs(*idList)
	if err != nil {
		return err
	}
	tok, err := tokenizer.Load(*tokPath)
	if err != nil {
		return err
	}
	text, err := tok.Decode(ids)
	if err != nil {
		return err
	}
	_, err = io.WriteString(stdout, text+"\n")
	return err
}

// parseIDs reads "1,2,3" (an empty list is allowed; spaces are ignored).
func parseIDs(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	parts := strings.Split(s, ",")
	ids := make([]int, 0, len(parts))
	for i, p := range parts {
		p = strings.TrimSpace(p)
		id, err := strconv.Atoi(p)
		if err != nil || id < 0 {
			return nil, fmt.Errorf("--ids: item %d %q is not a non-negative integer", i+1, p)
		}
		ids = append(ids, id)
	}
	return ids, nil
}
