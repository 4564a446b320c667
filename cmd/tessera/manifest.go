package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"github.com/tessera-llm/tessera/core/atomicfile"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
)

func init() {
	register("manifest", "write model.manifest.json (file sizes and sha256; FILE.gguf.manifest.json for a GGUF file) for loading a model in the browser", cmdManifest)
}

// Manifest file name (a GGUF file's: the file's name plus
// ggufManifestSuffix) and format tag; web/tessera-worker.js reads them.
const (
	manifestName       = "model.manifest.json"
	ggufManifestSuffix = ".manifest.json"
	manifestFormat     = "tessera-manifest/1"
)

// modelManifest lists the files the browser engine fetches, with the size
// and sha256 it checks each download against before caching it.
type modelManifest struct {
	Format    string         `json:"format"`
	TotalSize int64          `json:"total_size"`
	Files     []manifestFile `json:"files"`
}

type manifestFile struct {
	Name   string `json:"name"` // slash-separated, relative to the model directory
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"` // lower-case hex
	// Parts, when present, split the file into contiguous byte ranges that
	// the browser fetches (HTTP Range), checks and caches one by one, as
	// the engine reads them: a safetensors file whose vision tower
	// (vision_tower.*, mm_projector.*) lies in one run of tensors gets a
	// part for it, which a text-only page never downloads, and a file
	// larger than the part size (defaultPartSize) is cut into parts of at
	// most that size, so that the page never holds more than a part of a
	// download in memory to check it.
	Parts []manifestPart `json:"parts,omitempty"`
}

// manifestPart is one byte range of a file, with its own sha256.
type manifestPart struct {
	Offset int64  `json:"offset"`
	Size   int64  `json:"size"`
	SHA256 string `json:"sha256"`
	// Vision marks the part holding the vision tower's tensors: read on
	// the first image only.
	Vision bool `json:"vision,omitempty"`
}

// manifestFiles lists the files of dir the browser engine reads:
// config.json, tokenizer.json and the chat-template files (chat.Files)
// when present, and the safetensors index and
// shards or model.safetensors; for a GGUF file, that file. It checks
// first that the model loads.
func manifestFiles(dir string) ([]string, error) {
	_, ck, err := model.OpenDir(dir)
	if err != nil {
		return nil, err
	}
	defer ck.Close()
	if model.IsGGUF(dir) {
		return []string{filepath.Base(dir)}, nil
	}
	names := []string{"config.json"}
	for _, n := range append([]string{"tokenizer.json"}, chat.Files...) {
		if st, err := os.Stat(filepath.Join(dir, n)); err == nil && st.Mode().IsRegular() {
			names = append(names, n)
		}
	}
	if ck.Index != nil {
		names = append(names, safetensors.IndexFileName)
		names = append(names, ck.Index.Shards()...)
	} else {
		names = append(names, safetensors.SingleFileName)
	}
	return names, nil
}

// defaultPartSize is the part size of `tessera manifest` (--part-size) and
// of the manifest `tessera serve` writes: big enough that the requests
// cost nothing next to the bytes, small enough that a part's download
// and its sha256 check (WebCrypto digests whole buffers, copying them)
// take little memory next to the weights.
const defaultPartSize = 64 << 20

// buildManifest hashes the model files of dir (a directory, or a GGUF
// file: its manifest lists the file by its base name), cutting files
// larger than partSize into parts (0: only a vision tower's part).
func buildManifest(dir string, partSize int64) (*modelManifest, error) {
	names, err := manifestFiles(dir)
	if err != nil {
		return nil, err
	}
	dir = filesDir(dir)
	mf := &modelManifest{Format: manifestFormat}
	for _, n := range names {
		path := filepath.Join(dir, filepath.FromSlash(n))
		var parts []manifestPart
		if strings.HasSuffix(n, ".safetensors") {
			if parts, err = safetensorsParts(path); err != nil {
				return nil, err
			}
		}
		if strings.HasSuffix(n, ".safetensors") || strings.HasSuffix(n, ".gguf") {
			st, err := os.Stat(path)
			if err != nil {
				return nil, err
			}
			parts = splitParts(parts, st.Size(), partSize)
		}
		f, err := hashFile(path, parts)
		if err != nil {
			return nil, err
		}
		f.Name = n
		mf.Files = append(mf.Files, f)
		mf.TotalSize += f.Size
	}
	return mf, nil
}

// hashFile hashes the file at path whole and, in the same pass, each of
// parts (contiguous from offset 0, as safetensorsParts plans them), whose
// SHA256 it fills in.
func hashFile(path string, parts []manifestPart) (manifestFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return manifestFile{}, err
	}
	defer f.Close()
	h := sha256.New()
	var n int64
	for i := range parts {
		ph := sha256.New()
		k, err := io.Copy(io.MultiWriter(h, ph), io.LimitReader(f, parts[i].Size))
		n += k
		if err == nil && k < parts[i].Size {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return manifestFile{}, fmt.Errorf("reading %s: %w", path, err)
		}
		parts[i].SHA256 = hex.EncodeToString(ph.Sum(nil))
	}
	k, err := io.Copy(h, f)
	if err != nil {
		return manifestFile{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if n += k; len(parts) > 0 && k != 0 {
		return manifestFile{}, fmt.Errorf("%s changed while it was hashed (%d bytes past its parts)", path, k)
	}
	return manifestFile{Size: n, SHA256: hex.EncodeToString(h.Sum(nil)), Parts: parts}, nil
}

// splitParts cuts the parts of a file of size bytes (nil: the file as one
// part) into pieces of at most partSize bytes, each keeping its part's
// Vision flag; nil when that leaves one part. partSize 0 cuts nothing.
func splitParts(parts []manifestPart, size, partSize int64) []manifestPart {
	if parts == nil {
		parts = []manifestPart{{Offset: 0, Size: size}}
	}
	var out []manifestPart
	for _, p := range parts {
		for off := p.Offset; off < p.Offset+p.Size; {
			n := p.Offset + p.Size - off
			if partSize > 0 {
				n = min(n, partSize)
			}
			out = append(out, manifestPart{Offset: off, Size: n, Vision: p.Vision})
			off += n
		}
	}
	if len(out) < 2 {
		return nil
	}
	return out
}

// safetensorsParts plans the parts of a safetensors file: nil unless its
// vision tensors (vision.IsVisionTensor) and its other tensors are both
// present and the vision tensors' data is one contiguous run; then the
// runs in file order, the header joined to the first, each run's trailing
// padding to it, so that the parts cover the file.
func safetensorsParts(path string) ([]manifestPart, error) {
	src, err := safetensors.OpenFile(path)
	if err != nil {
		return nil, err
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	sf, err := safetensors.Parse(src, filepath.Base(path))
	if err != nil {
		return nil, err
	}
	ts := make([]*safetensors.Tensor, 0, len(sf.Tensors))
	for _, t := range sf.Tensors {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i].Offset < ts[j].Offset })
	var parts []manifestPart
	runs := 0
	for _, t := range ts {
		v := vision.IsVisionTensor(t.Name)
		if len(parts) > 0 && parts[len(parts)-1].Vision == v {
			continue
		}
		if v {
			runs++
		}
		if len(parts) > 0 {
			parts[len(parts)-1].Size = t.Offset - parts[len(parts)-1].Offset
		}
		off := t.Offset
		if len(parts) == 0 {
			off = 0 // the header belongs to the first part
		}
		parts = append(parts, manifestPart{Offset: off, Vision: v})
	}
	if runs != 1 || len(parts) < 2 {
		return nil, nil
	}
	parts[len(parts)-1].Size = src.Size() - parts[len(parts)-1].Offset
	return parts, nil
}

// manifestPath is where the manifest of a model directory
// (DIR/model.manifest.json) or GGUF file (FILE.gguf.manifest.json) lives.
func manifestPath(path string) string {
	if model.IsGGUF(path) {
		return path + ggufManifestSuffix
	}
	return filepath.Join(path, manifestName)
}

// filesDir is the directory a manifest's file names are relative to.
func filesDir(path string) string {
	if model.IsGGUF(path) {
		return filepath.Dir(path)
	}
	return path
}

// staleManifest reports why the manifest does not describe dir's files any
// more (a size differs or a file is missing), or "" when sizes agree. It
// does not re-hash. dir is a model directory or GGUF file.
func staleManifest(dir string, mf *modelManifest) string {
	base := filesDir(dir)
	for _, f := range mf.Files {
		st, err := os.Stat(filepath.Join(base, filepath.FromSlash(f.Name)))
		if err != nil {
			return fmt.Sprintf("%s lists %s, which is missing", manifestName, f.Name)
		}
		if st.Size() != f.Size {
			return fmt.Sprintf("%s lists %s with %d bytes but the file has %d", manifestName, f.Name, f.Size, st.Size())
		}
	}
	return ""
}

// readManifest reads the manifest of dir (a model directory or GGUF
// file, manifestPath); a missing one gives an error wrapping
// fs.ErrNotExist.
func readManifest(dir string) (*modelManifest, error) {
	path := manifestPath(dir)
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var mf modelManifest
	if err := json.Unmarshal(b, &mf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if mf.Format != manifestFormat {
		return nil, fmt.Errorf("%s: format %q, want %q", path, mf.Format, manifestFormat)
	}
	return &mf, nil
}

func (mf *modelManifest) marshal() []byte {
	b, _ := json.MarshalIndent(mf, "", "  ") // plain structs: cannot fail
	return append(b, '\n')
}

func cmdManifest(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("manifest", "--model DIR|FILE.gguf [--out FILE] [--part-size BYTES]", stderr)
	dir := fs.String("model", "", "model directory (config.json + safetensors) or GGUF file")
	out := fs.String("out", "", "output file (default DIR/"+manifestName+", or FILE.gguf"+ggufManifestSuffix+"; - for stdout)")
	partSize := fs.String("part-size", "64M", "cut weight files larger than this into parts the browser downloads, checks and caches one by one (0: whole files)")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if *dir == "" || fs.NArg() > 0 {
		fs.Usage()
		return fmt.Errorf("need --model DIR and no other arguments: %w", errUsage)
	}
	ps, err := engine.ParseBytes(*partSize)
	if err != nil || ps < 0 || (ps > 0 && ps < 1<<20) {
		return fmt.Errorf("--part-size %q: want a size of at least 1M (64M, 256M, …) or 0 for whole files: %w", *partSize, errUsage)
	}
	mf, err := buildManifest(*dir, ps)
	if err != nil {
		return err
	}
	data := mf.marshal()
	if *out == "-" {
		_, err := stdout.Write(data)
		return err
	}
	path := *out
	if path == "" {
		path = manifestPath(*dir)
	}
	if err := atomicfile.WriteBytes(path, 0o644, data); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(stdout, "wrote %s: %d files, %s\n", path, len(mf.Files), bytesStr(mf.TotalSize))
	return nil
}
