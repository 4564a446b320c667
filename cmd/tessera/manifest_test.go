package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManifest(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "m")
	e2eRun(t, "init-random", "--config", "k3-nano", "--seed", "1", "--shard-bytes", "400000", "--out", dir)
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model":{"type":"BPE","vocab":{},"merges":[]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	out := e2eRun(t, "manifest", "--model", dir)
	if !strings.Contains(out, manifestName) {
		t.Errorf("output %q", out)
	}
	mf, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	var total int64
	for _, f := range mf.Files {
		names = append(names, f.Name)
		b, err := os.ReadFile(filepath.Join(dir, f.Name))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if f.Size != int64(len(b)) || f.SHA256 != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: manifest %d %s, file %d %x", f.Name, f.Size, f.SHA256, len(b), sum)
		}
		total += f.Size
	}
	if len(names) < 5 || names[0] != "config.json" || names[1] != "tokenizer.json" || names[2] != "model.safetensors.index.json" ||
		!strings.HasPrefix(names[3], "model-0000") || total != mf.TotalSize {
		t.Errorf("files %v total %d/%d", names, total, mf.TotalSize)
	}
	if s := staleManifest(dir, mf); s != "" {
		t.Errorf("fresh manifest reported stale: %s", s)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), append([]byte(" "), mustRead(t, filepath.Join(dir, "config.json"))...), 0o644); err != nil {
		t.Fatal(err)
	}
	if s := staleManifest(dir, mf); !strings.Contains(s, "config.json") {
		t.Errorf("changed config.json not reported: %q", s)
	}

	var stdout bytes.Buffer
	if code := runMain([]string{"manifest", "--model", dir, "--out", "-"}, &stdout, &bytes.Buffer{}); code != 0 {
		t.Fatalf("--out -: exit %d", code)
	}
	var again modelManifest
	if err := json.Unmarshal(stdout.Bytes(), &again); err != nil || again.Format != manifestFormat {
		t.Errorf("stdout manifest: %v", err)
	}

	var errb bytes.Buffer
	if code := runMain([]string{"manifest"}, &stdout, &errb); code != 2 {
		t.Errorf("no --model: exit %d", code)
	}
	errb.Reset()
	if code := runMain([]string{"manifest", "--model", t.TempDir()}, &stdout, &errb); code != 1 || !strings.Contains(errb.String(), "config.json") {
		t.Errorf("empty dir: exit %d, %q", code, errb.String())
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// A GGUF file's manifest (FILE.gguf.manifest.json, what the browser checks
// a .gguf URL against) lists that one file with its size and sha256.
func TestManifestGGUF(t *testing.T) {
	dir := t.TempDir()
	model := filepath.Join(dir, "m")
	e2eRun(t, "init-random", "--config", "k3-nano", "--seed", "1", "--out", model)
	file := filepath.Join(dir, "m.q8_0.gguf")
	e2eRun(t, "export", "--model", model, "--out", file, "--type", "q8_0")
	if out := e2eRun(t, "manifest", "--model", file); !strings.Contains(out, "m.q8_0.gguf"+ggufManifestSuffix) {
		t.Errorf("output %q", out)
	}
	raw, err := os.ReadFile(file + ggufManifestSuffix)
	if err != nil {
		t.Fatal(err)
	}
	var mf modelManifest
	if err := json.Unmarshal(raw, &mf); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if len(mf.Files) != 1 || mf.Files[0].Name != "m.q8_0.gguf" || mf.Files[0].Size != int64(len(data)) ||
		mf.Files[0].SHA256 != hex.EncodeToString(sum[:]) || mf.TotalSize != int64(len(data)) || mf.Format != manifestFormat {
		t.Errorf("manifest %+v, want the one file of %d bytes", mf, len(data))
	}
}
