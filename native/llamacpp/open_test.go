//go:build cgo && linux && amd64

package llamacpp

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// openPeer opens the libraries from DefaultDir, skipping when they are not
// fetched; under CI=true a missing library fails.
func openPeer(t testing.TB) *Lib {
	t.Helper()
	l, err := Open("")
	if errors.Is(err, ErrNotInstalled) && os.Getenv("CI") != "true" {
		t.Skipf("%v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// Open loads the libraries, checks commit and struct layouts (see Open) and
// finds a CPU backend.
func TestOpen(t *testing.T) {
	l := openPeer(t)
	if l.Commit != Commit {
		t.Fatalf("commit %q, want %q", l.Commit, Commit)
	}
	if !strings.Contains(l.SystemInfo, "CPU") {
		t.Fatalf("system info names no CPU backend: %q", l.SystemInfo)
	}
	t.Logf("llama.cpp %s from %s: %s", l.Commit, l.Dir, l.SystemInfo)
	l2, err := Open(l.Dir)
	if err != nil || l2 != l {
		t.Fatalf("second Open: %v, same Lib %v", err, l2 == l)
	}
	if _, err := Open(t.TempDir()); err == nil {
		t.Fatal("Open of another directory after the first succeeded")
	}
}

// A missing library directory names the path and the fetch command.
func TestMissingNamesFetch(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing")
	err := missing(dir)
	if !errors.Is(err, ErrNotInstalled) || !strings.Contains(err.Error(), dir) || !strings.Contains(err.Error(), "scripts/peers/fetch.sh") {
		t.Fatalf("error %q", err)
	}
}

// A model file that does not exist is an error, not a crash.
func TestLoadMissingModel(t *testing.T) {
	l := openPeer(t)
	if _, err := l.LoadModel(filepath.Join(t.TempDir(), "none.gguf"), ModelParams{}); err == nil {
		t.Fatal("loading a missing file succeeded")
	}
}
