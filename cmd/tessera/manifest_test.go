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

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
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
	for _, bad := range []string{"x", "-1", "1000", "12Q"} {
		errb.Reset()
		if code := runMain([]string{"manifest", "--model", dir, "--part-size", bad}, &stdout, &errb); code != 2 || !strings.Contains(errb.String(), `--part-size "`+bad+`"`) {
			t.Errorf("--part-size %s: exit %d, %q", bad, code, errb.String())
		}
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

// splitParts cuts parts bigger than the part size into pieces that keep
// their part's Vision flag and cover it; one part is none.
func TestSplitParts(t *testing.T) {
	type p = manifestPart
	for _, tc := range []struct {
		name        string
		parts       []p
		size, limit int64
		want        []p
	}{
		{"small file", nil, 100, 64, []p{{Offset: 0, Size: 64}, {Offset: 64, Size: 36}}},
		{"exact", nil, 128, 64, []p{{Offset: 0, Size: 64}, {Offset: 64, Size: 64}}},
		{"fits", nil, 64, 64, nil},
		{"no limit", nil, 1000, 0, nil},
		{"vision kept", []p{{Offset: 0, Size: 70}, {Offset: 70, Size: 30, Vision: true}}, 100, 64,
			[]p{{Offset: 0, Size: 64}, {Offset: 64, Size: 6}, {Offset: 70, Size: 30, Vision: true}}},
		{"vision cut", []p{{Offset: 0, Size: 10}, {Offset: 10, Size: 130, Vision: true}}, 140, 64,
			[]p{{Offset: 0, Size: 10}, {Offset: 10, Size: 64, Vision: true}, {Offset: 74, Size: 64, Vision: true}, {Offset: 138, Size: 2, Vision: true}}},
		{"vision, no limit", []p{{Offset: 0, Size: 10}, {Offset: 10, Size: 5, Vision: true}}, 15, 0,
			[]p{{Offset: 0, Size: 10}, {Offset: 10, Size: 5, Vision: true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, splitParts(tc.parts, tc.size, tc.limit))
		})
	}

	// tessera manifest --part-size on a GGUF file: parts of at most that
	// size, each with its own sha256, covering the file
	file := filepath.Join(t.TempDir(), "m.f16.gguf")
	e2eRun(t, "export", "--model", "../../models/k3-micro", "--out", file, "--type", "f16") // 26 MiB
	e2eRun(t, "manifest", "--model", file, "--part-size", "1M")
	mf, err := readManifest(file)
	require.NoError(t, err)
	require.Len(t, mf.Files, 1)
	data := mustRead(t, file)
	f := mf.Files[0]
	require.Len(t, f.Parts, (len(data)+1<<20-1)>>20)
	at := int64(0)
	for i, q := range f.Parts {
		assert.Equal(t, at, q.Offset, "part %d", i)
		assert.LessOrEqual(t, q.Size, int64(1<<20), "part %d", i)
		sum := sha256.Sum256(data[q.Offset : q.Offset+q.Size])
		assert.Equal(t, hex.EncodeToString(sum[:]), q.SHA256, "part %d", i)
		at += q.Size
	}
	assert.Equal(t, int64(len(data)), at)
}

// A safetensors file whose vision tensors lie in one run gets parts: the
// runs in file order (the header in the first), each with the sha256 of
// its bytes, covering the file; otherwise it has none.
func TestManifestParts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		names  []string
		vision []bool // the parts' Vision flags; nil: no parts
	}{
		{"vision last", []string{"language_model.a", "language_model.b", "mm_projector.c", "vision_tower.d"}, []bool{false, true}},
		{"vision between", []string{"language_model.a", "vision_tower.d", "zz.e"}, []bool{false, true, false}},
		{"vision first", []string{"mm_projector.c", "vision_tower.d", "zz.e"}, []bool{true, false}},
		{"text only", []string{"language_model.a", "model.norm"}, nil},
		{"vision only", []string{"mm_projector.c", "vision_tower.d"}, nil},
		{"two vision runs", []string{"a", "mm_projector.c", "n", "vision_tower.d"}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var ts []safetensors.WriteTensor
			for i, n := range tc.names {
				ts = append(ts, safetensors.WriteTensor{Name: n, DType: "F32", Shape: []int{i + 3}, Data: make([]float32, i+3)})
			}
			var buf bytes.Buffer
			require.NoError(t, safetensors.Write(&buf, ts, nil))
			path := filepath.Join(t.TempDir(), "model.safetensors")
			require.NoError(t, os.WriteFile(path, buf.Bytes(), 0o644))
			parts, err := safetensorsParts(path)
			require.NoError(t, err)
			f, err := hashFile(path, parts)
			require.NoError(t, err)
			whole := sha256.Sum256(buf.Bytes())
			assert.Equal(t, hex.EncodeToString(whole[:]), f.SHA256)
			assert.Equal(t, int64(buf.Len()), f.Size)
			if tc.vision == nil {
				assert.Nil(t, f.Parts)
				return
			}
			require.Len(t, f.Parts, len(tc.vision))
			sf, err := safetensors.Parse(safetensors.BytesSource(buf.Bytes()), "model.safetensors")
			require.NoError(t, err)
			at := int64(0)
			for i, p := range f.Parts {
				assert.Equal(t, at, p.Offset, "part %d", i)
				assert.Equal(t, tc.vision[i], p.Vision, "part %d", i)
				sum := sha256.Sum256(buf.Bytes()[p.Offset : p.Offset+p.Size])
				assert.Equal(t, hex.EncodeToString(sum[:]), p.SHA256, "part %d", i)
				// every tensor lies in a part of its kind
				for _, st := range sf.Tensors {
					if st.Offset >= p.Offset && st.Offset < p.Offset+p.Size {
						assert.Equal(t, p.Vision, vision.IsVisionTensor(st.Name), "%s in part %d", st.Name, i)
						assert.LessOrEqual(t, st.Offset+st.Size, p.Offset+p.Size, "%s crosses part %d's end", st.Name, i)
					}
				}
				at += p.Size
			}
			assert.Equal(t, f.Size, at)
		})
	}

	// tessera manifest on a vision model: its checkpoint comes in a text
	// part and a vision part.
	dir := filepath.Join(t.TempDir(), "v")
	e2eRun(t, "init-random", "--config", "k3-nano-vision", "--seed", "1", "--layout", "kimi_k3", "--out", dir)
	e2eRun(t, "manifest", "--model", dir)
	mf, err := readManifest(dir)
	require.NoError(t, err)
	for _, f := range mf.Files {
		if f.Name == safetensors.SingleFileName {
			require.Len(t, f.Parts, 2)
			assert.True(t, !f.Parts[0].Vision && f.Parts[1].Vision, "parts %+v", f.Parts)
			return
		}
	}
	t.Fatalf("no %s in %+v", safetensors.SingleFileName, mf.Files)
}
