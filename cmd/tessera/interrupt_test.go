package main

import (
	"bytes"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

var hardBin struct {
	once sync.Once
	path string
	err  error
	out  []byte
}

// hardBinary builds the tessera binary once for the tests that run it as a
// separate process (signals, exit codes, stderr).
func hardBinary(t *testing.T) string {
	t.Helper()
	hardBin.once.Do(func() {
		dir, err := os.MkdirTemp("", "tessera-bin-")
		if err != nil {
			hardBin.err = err
			return
		}
		hardBin.path = filepath.Join(dir, "tessera")
		hardBin.out, hardBin.err = exec.Command("go", "build", "-o", hardBin.path, ".").CombinedOutput()
	})
	require.NoError(t, hardBin.err, string(hardBin.out))
	return hardBin.path
}

// Ctrl-C (SIGINT) during run, chat (mid-reply), bench and logits ends the
// process within a few seconds with exit status 130 and exactly one line
// on stderr, "tessera CMD: interrupted", and no panic trace.
func TestInterruptExits130(t *testing.T) {
	bin := hardBinary(t)
	dir := filepath.Join(t.TempDir(), "m")
	require.NoError(t, exec.Command(bin, "init-random", "--config", "k3-nano", "--layout", "kimi_k3", "--out", dir).Run())
	// An end-of-sequence id outside the vocabulary: generation runs until
	// --max-tokens, long enough to be interrupted.
	cfgPath := filepath.Join(dir, "config.json")
	cfg, err := os.ReadFile(cfgPath)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(cfgPath, bytes.Replace(cfg, []byte(`"eos_token_id": 2`), []byte(`"eos_token_id": 600`), 1), 0o644))
	byteLevelTokenizer(t, dir)
	npy := filepath.Join(t.TempDir(), "x.npy")
	long := strings.Repeat("7,", 30000) + "7"
	for _, args := range [][]string{
		{"run", "--model", dir, "--prompt", "hi", "--max-tokens", "100000000", "--ids"},
		{"chat", "--model", dir, "--max-tokens", "100000000", "--temperature", "0"},
		{"bench", "--model", dir, "--gen", "64", "--repeats", "100000"},
		{"logits", "--model", dir, "--tokens", long, "--out", npy, "--chunk", "1"},
	} {
		t.Run(args[0], func(t *testing.T) {
			cmd := exec.Command(bin, args...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, err := cmd.StdoutPipe()
			require.NoError(t, err)
			stdin, err := cmd.StdinPipe()
			require.NoError(t, err)
			defer stdin.Close()
			require.NoError(t, cmd.Start())
			go io.Copy(io.Discard, stdout)
			if args[0] == "chat" {
				io.WriteString(stdin, "tell me a very long story\n") // then stays open: mid-reply
			}
			time.Sleep(1500 * time.Millisecond)
			require.Nil(t, cmd.ProcessState, "%s ended before the signal: %s", args[0], stderr.String())
			sent := time.Now()
			require.NoError(t, cmd.Process.Signal(syscall.SIGINT))
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err = <-done:
			case <-time.After(5 * time.Second):
				cmd.Process.Kill()
				t.Fatalf("%s still running 5 s after SIGINT", args[0])
			}
			t.Logf("%s stopped %v after SIGINT", args[0], time.Since(sent).Round(time.Millisecond))
			ee, ok := err.(*exec.ExitError)
			require.True(t, ok, "want a non-zero exit, got %v", err)
			require.Equal(t, 130, ee.ExitCode(), "stderr: %s", stderr.String())
			// Drop the banners chat and bench print before any work.
			var lines []string
			for _, l := range strings.Split(stderr.String(), "\n") {
				if l != "" && !strings.HasPrefix(l, "bench: measuring memory bandwidth") && !strings.HasPrefix(l, "tessera chat (") {
					lines = append(lines, l)
				}
			}
			msg := strings.Join(lines, "\n")
			require.NotContains(t, msg, "panic")
			require.NotContains(t, msg, "goroutine")
			require.Equal(t, "tessera "+args[0]+": interrupted", msg)
		})
	}
	_, err = os.Stat(npy)
	require.True(t, os.IsNotExist(err), "an interrupted logits run left %s", npy)
}
