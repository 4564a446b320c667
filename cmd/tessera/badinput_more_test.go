package main

import (
	"bytes"
	"encoding/binary"
	"github.com/tessera-llm/tessera/core/engine"
	"hash/crc32"
	"image"
	"image/jpeg"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// badCase is one CLI invocation over bad input and the exit code it must
// end with: 1 for bad content, 2 for usage errors.
type badCase struct {
	name  string
	args  []string
	env   []string
	stdin string
	code  int
}

// More classes of bad input than TestBadInputsFailCleanly: broken
// tokenizers next to a good model, broken images for run --image, bad flag
// values, a model larger than the memory available, prompts beyond the
// context. Each ends with its exit code and, for code 1, exactly one line
// on stderr naming the command; never a panic or goroutine trace.
func TestBadInputsMoreClasses(t *testing.T) {
	bin := hardBinary(t)
	tmp := t.TempDir()
	good, vis := filepath.Join(tmp, "good"), filepath.Join(tmp, "vis")
	for dir, preset := range map[string]string{good: "k3-nano", vis: "k3-nano-vision"} {
		out, err := exec.Command(bin, "init-random", "--config", preset, "--seed", "1", "--out", dir).CombinedOutput()
		require.NoError(t, err, string(out))
	}
	// A model directory that is good but for the given extra files.
	withFiles := func(name string, files map[string][]byte) string {
		d := filepath.Join(tmp, name)
		require.NoError(t, os.MkdirAll(d, 0o755))
		for _, f := range []string{"config.json", "model.safetensors"} {
			b, err := os.ReadFile(filepath.Join(good, f))
			require.NoError(t, err)
			if nb, ok := files[f]; ok {
				b = nb
			}
			require.NoError(t, os.WriteFile(filepath.Join(d, f), b, 0o644))
		}
		for f, b := range files {
			require.NoError(t, os.WriteFile(filepath.Join(d, f), b, 0o644))
		}
		return d
	}
	cfg, err := os.ReadFile(filepath.Join(good, "config.json"))
	require.NoError(t, err)
	short := withFiles("ctx16", map[string][]byte{"config.json": bytes.Replace(cfg, []byte(`"max_position_embeddings": 1048576`), []byte(`"max_position_embeddings": 16`), 1)})
	require.NotContains(t, mustRead(t, filepath.Join(short, "config.json")), "1048576")

	// Images.
	img := func(name string, b []byte) string {
		p := filepath.Join(tmp, name)
		require.NoError(t, os.WriteFile(p, b, 0o644))
		return p
	}
	var jb bytes.Buffer
	require.NoError(t, jpeg.Encode(&jb, image.NewRGBA(image.Rect(0, 0, 64, 64)), nil))
	hugePNG := []byte("\x89PNG\r\n\x1a\n")
	ihdr := binary.BigEndian.AppendUint32(nil, 13)
	ihdr = append(ihdr, "IHDR"...)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 100000)
	ihdr = binary.BigEndian.AppendUint32(ihdr, 100000)
	ihdr = append(ihdr, 8, 6, 0, 0, 0)
	ihdr = binary.BigEndian.AppendUint32(ihdr, crc32.ChecksumIEEE(ihdr[4:]))
	hugePNG = append(hugePNG, ihdr...)
	images := map[string]string{
		"jpeg-truncated-header": img("a.jpg", jb.Bytes()[:40]),
		"jpeg-truncated-scan":   img("b.jpg", jb.Bytes()[:jb.Len()-20]),
		"png-100000px-header":   img("c.png", hugePNG),
		"not-an-image":          img("d.png", []byte("hello, not an image\n")),
		"empty-file":            img("e.jpg", nil),
		"missing-file":          filepath.Join(tmp, "nope.png"),
		"a-directory":           tmp,
	}

	long := strings.TrimSuffix(strings.Repeat("5,", 20), ",")
	npy := filepath.Join(tmp, "x.npy")
	cases := []badCase{
		// Tokenizers next to a good model.
		{name: "tokenizer-not-json", args: []string{"run", "--model", withFiles("tok1", map[string][]byte{"tokenizer.json": []byte(`{"model": `)}), "--prompt", "hi"}, code: 1},
		{name: "tokenizer-json-array", args: []string{"run", "--model", withFiles("tok2", map[string][]byte{"tokenizer.json": []byte(`[]`)}), "--prompt", "hi"}, code: 1},
		{name: "tokenizer-no-model", args: []string{"chat", "--model", withFiles("tok3", map[string][]byte{"tokenizer.json": []byte(`{}`)})}, stdin: "hi\n", code: 1},
		{name: "tokenizer-sparse-ids", args: []string{"run", "--model", withFiles("tok4", map[string][]byte{"tokenizer.json": []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":16777000},"merges":[]}}`)}), "--prompt", "hi"}, code: 1},
		{name: "tokenizer-id-negative", args: []string{"tokenize", "--tokenizer", withFiles("tok5", map[string][]byte{"tokenizer.json": []byte(`{"model":{"type":"BPE","vocab":{"a":-1},"merges":[]}}`)}), "--text", "a"}, code: 1},
		{name: "tiktoken-garbage", args: []string{"run", "--model", withFiles("tok6", map[string][]byte{"tiktoken.model": []byte("garbage line\n")}), "--prompt", "hi"}, code: 1},
		{name: "tiktoken-bad-config", args: []string{"run", "--model", withFiles("tok7", map[string][]byte{"tiktoken.model": []byte("YQ== 0\n"), "tokenizer_config.json": []byte(`{"added_tokens_decoder":{"x":{}}}`)}), "--prompt", "hi"}, code: 1},
		// Flag values.
		{name: "flag-not-int", args: []string{"run", "--model", good, "--prompt", "hi", "--max-tokens", "abc"}, code: 2},
		{name: "flag-unknown", args: []string{"run", "--model", good, "--prompt", "hi", "--bogus"}, code: 2},
		{name: "flag-both-prompts", args: []string{"run", "--model", good, "--prompt", "hi", "--tokens", "1"}, code: 2},
		{name: "flag-negative-max-tokens", args: []string{"run", "--model", good, "--prompt", "hi", "--max-tokens", "-1"}, code: 1},
		{name: "flag-zero-chunk", args: []string{"run", "--model", good, "--prompt", "hi", "--chunk", "0"}, code: 1},
		// Was a panic (slice bounds out of range) before --chunk was checked.
		{name: "flag-logits-negative-chunk", args: []string{"logits", "--model", good, "--tokens", "1,2", "--out", npy, "--chunk", "-3"}, code: 1},
		{name: "flag-logits-zero-chunk", args: []string{"logits", "--model", good, "--tokens", "1,2", "--out", npy, "--chunk", "0"}, code: 1},
		{name: "flag-negative-temperature", args: []string{"run", "--model", good, "--prompt", "hi", "--temperature", "-1"}, code: 1},
		{name: "flag-top-p-2", args: []string{"run", "--model", good, "--prompt", "hi", "--top-p", "2"}, code: 1},
		{name: "flag-backend-foo", args: []string{"run", "--model", good, "--prompt", "hi", "--backend", "foo"}, code: 1},
		{name: "flag-tokens-not-int", args: []string{"run", "--model", good, "--tokens", "1,x"}, code: 1},
		{name: "flag-tokens-empty-entry", args: []string{"logits", "--model", good, "--tokens", "1,,2", "--out", npy}, code: 1},
		{name: "flag-token-outside-vocab", args: []string{"run", "--model", good, "--tokens", "99999"}, code: 1},
		{name: "flag-bench-zero-gen", args: []string{"bench", "--model", good, "--gen", "0"}, code: 1},
		{name: "flag-logits-out-dir-missing", args: []string{"logits", "--model", good, "--tokens", "1", "--out", filepath.Join(tmp, "no", "such", "x.npy")}, code: 1},
		{name: "flag-model-missing", args: []string{"run", "--model", filepath.Join(tmp, "nope"), "--prompt", "hi"}, code: 1},
		// Memory.
		{name: "memory-too-small", args: []string{"run", "--model", good, "--prompt", "hi"}, env: []string{engine.MemEnv + "=512K"}, code: 1},
		{name: "memory-too-small-bench", args: []string{"bench", "--model", good}, env: []string{engine.MemEnv + "=1K"}, code: 1},
		{name: "memory-env-bad", args: []string{"logits", "--model", good, "--tokens", "1", "--out", npy}, env: []string{engine.MemEnv + "=lots"}, code: 1},
		// Context.
		{name: "context-run", args: []string{"run", "--model", short, "--tokens", long}, code: 1},
		{name: "context-logits", args: []string{"logits", "--model", short, "--tokens", long, "--out", npy}, code: 1},
		{name: "context-bench", args: []string{"bench", "--model", short, "--prompt-len", "20", "--gen", "1"}, code: 1},
	}
	for name, p := range images {
		cases = append(cases, badCase{name: "image-" + name, args: []string{"run", "--model", vis, "--prompt", "hi", "--image", p}, code: 1})
	}
	cases = append(cases, badCase{name: "image-on-text-model", args: []string{"run", "--model", good, "--prompt", "hi", "--image", images["not-an-image"]}, code: 1})

	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cmd := exec.Command(bin, c.args...)
			cmd.Env = append(os.Environ(), c.env...)
			cmd.Stdin = strings.NewReader(c.stdin)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "want a non-zero exit, got %v; stderr %s", err, stderr.String())
			out := stderr.String()
			require.NotContains(t, out, "panic")
			require.NotContains(t, out, "goroutine")
			require.Equal(t, c.code, ee.ExitCode(), "stderr:\n%s", out)
			// Drop the informational banners chat and bench print first.
			var lines []string
			for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
				if !strings.HasPrefix(l, "bench: measuring memory bandwidth") && !strings.HasPrefix(l, "tessera chat — ") {
					lines = append(lines, l)
				}
			}
			if c.code == 1 {
				require.Len(t, lines, 1, "want one line on stderr, got:\n%s", out)
				require.True(t, strings.HasPrefix(lines[0], "tessera "+c.args[0]+": "), "%s", lines[0])
			} else {
				require.NotEmpty(t, strings.TrimSpace(lines[0]), "usage error without a message")
			}
			t.Log(lines[0])
		})
	}
}
