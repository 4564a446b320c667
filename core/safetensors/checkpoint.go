package safetensors

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"sort"
)

// File names looked up by Open.
const (
	SingleFileName = "model.safetensors"
	IndexFileName  = "model.safetensors.index.json"
)

// MaxIndexSize is the largest index JSON file Open accepts (100 MiB).
const MaxIndexSize = 100 << 20

// Opener opens a file of the model directory by slash-separated relative
// name ("model.safetensors", "model-00001-of-00002.safetensors",
// "model.safetensors.index.json"). Native code opens and memory-maps files
// (DirOpener); the browser passes fetched bytes (MemOpener) or a ranged
// reader. When the file does not exist the error must wrap fs.ErrNotExist.
// Sources that implement io.Closer are closed by Checkpoint.Close.
type Opener func(name string) (Source, error)

// Index is a parsed model.safetensors.index.json.
type Index struct {
	// Metadata holds the "metadata" object. String values are kept as is;
	// other values (e.g. "total_size": 123) as their JSON text.
	Metadata map[string]string
	// WeightMap maps each tensor name to the shard file holding it.
	WeightMap map[string]string
}

// Shards returns the distinct shard file names of the index, sorted.
func (ix *Index) Shards() []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ix.WeightMap {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	sort.Strings(out)
	return out
}

// ParseIndex parses and validates the JSON of a sharded checkpoint index,
// {"metadata": {...}, "weight_map": {"tensor": "shard file"}}. name is used
// in error messages. It rejects invalid JSON, a missing or empty weight_map,
// duplicate tensor names, and shard names that are not relative paths
// inside the model directory.
func ParseIndex(data []byte, name string) (*Index, error) {
	ferr := func(tensor string, off int64, format string, args ...any) error {
		return &FormatError{File: name, Tensor: tensor, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	ix := &Index{Metadata: map[string]string{}}
	// nested turns an error from decoding the member at valOff into an
	// error with an absolute offset, naming the member.
	nested := func(member string, valOff int64, err error) error {
		var oe *offsetError
		if errors.As(err, &oe) {
			return ferr("", valOff+oe.off, "%q: %v", member, oe.err)
		}
		return err
	}
	err := decodeObject(data, func(key string, valOff int64, raw json.RawMessage) error {
		switch key {
		case "metadata":
			if string(raw) == "null" {
				return nil
			}
			err := decodeObject(raw, func(k string, _ int64, v json.RawMessage) error {
				var s string
				if json.Unmarshal(v, &s) == nil {
					ix.Metadata[k] = s
				} else {
					ix.Metadata[k] = string(v)
				}
				return nil
			})
			return nested("metadata", valOff, err)
		case "weight_map":
			if ix.WeightMap != nil {
				return ferr("", valOff, "duplicate \"weight_map\" key")
			}
			ix.WeightMap = map[string]string{}
			err := decodeObject(raw, func(t string, off int64, v json.RawMessage) error {
				at := valOff + off
				if t == "" {
					return ferr("", at, "weight_map has an empty tensor name")
				}
				if _, dup := ix.WeightMap[t]; dup {
					return ferr(t, at, "duplicate tensor name in weight_map")
				}
				var shard string
				if err := json.Unmarshal(v, &shard); err != nil {
					return ferr(t, at, "weight_map value must be a shard file name string, got %.40s", string(v))
				}
				if !fs.ValidPath(shard) || shard == "." {
					return ferr(t, at, "shard file name %q is not a relative path inside the model directory", shard)
				}
				ix.WeightMap[t] = shard
				return nil
			})
			return nested("weight_map", valOff, err)
		}
		return nil // unknown top-level keys are ignored
	})
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		var oe *offsetError
		if errors.As(err, &oe) {
			return nil, ferr("", oe.off, "invalid JSON: %v", oe.err)
		}
		return nil, ferr("", -1, "invalid JSON: %v", err)
	}
	if ix.WeightMap == nil {
		return nil, ferr("", -1, "index has no \"weight_map\" object")
	}
	if len(ix.WeightMap) == 0 {
		return nil, ferr("", -1, "index \"weight_map\" is empty")
	}
	return ix, nil
}

// Checkpoint is a model's tensors over one or many shards. Its read methods
// are safe for concurrent use; Close must not run concurrently with them.
type Checkpoint struct {
	// Metadata is the single file's "__metadata__", or for a sharded
	// checkpoint the first shard's "__metadata__" overlaid with the
	// index's "metadata" (which holds e.g. "total_size").
	Metadata map[string]string
	// Index is the parsed index of a sharded checkpoint, or nil.
	Index *Index

	files   []*File // sorted by name
	tensors map[string]*Tensor
	srcs    map[string]Source
	closed  bool
}

// Open loads the checkpoint whose files open returns. It reads
// model.safetensors.index.json if present and then every shard it names,
// else model.safetensors. For a sharded checkpoint it checks that every
// tensor of the weight_map exists in its shard, that no shard holds a
// tensor the weight_map does not assign to it, and that no tensor appears
// in two shards. Only headers are read; tensor data is read on demand.
func Open(open Opener) (*Checkpoint, error) {
	c := &Checkpoint{tensors: map[string]*Tensor{}, srcs: map[string]Source{}}
	ixSrc, err := open(IndexFileName)
	switch {
	case err == nil && ixSrc == nil:
		return nil, fmt.Errorf("safetensors: opener returned no source and no error for %s", IndexFileName)
	case err == nil:
		if err := c.openSharded(open, ixSrc); err != nil {
			c.Close()
			return nil, err
		}
		return c, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("safetensors: opening %s: %w", IndexFileName, err)
	}
	src, err := open(SingleFileName)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("safetensors: no checkpoint: neither %s nor %s exists: %w", IndexFileName, SingleFileName, err)
		}
		return nil, fmt.Errorf("safetensors: opening %s: %w", SingleFileName, err)
	}
	if src == nil {
		return nil, fmt.Errorf("safetensors: opener returned no source and no error for %s", SingleFileName)
	}
	c.srcs[SingleFileName] = src
	f, err := Parse(src, SingleFileName)
	if err != nil {
		c.Close()
		return nil, err
	}
	c.files = []*File{f}
	c.tensors = f.Tensors
	c.Metadata = f.Metadata
	return c, nil
}

func (c *Checkpoint) openSharded(open Opener, ixSrc Source) error {
	data, err := readAll(ixSrc, IndexFileName, MaxIndexSize)
	if cl, ok := ixSrc.(io.Closer); ok {
		cl.Close()
	}
	if err != nil {
		return err
	}
	ix, err := ParseIndex(data, IndexFileName)
	if err != nil {
		return err
	}
	c.Index = ix
	for _, shard := range ix.Shards() {
		src, err := open(shard)
		if err != nil {
			return fmt.Errorf("safetensors: opening shard %s named in %s: %w", shard, IndexFileName, err)
		}
		if src == nil {
			return fmt.Errorf("safetensors: opener returned no source and no error for shard %s", shard)
		}
		c.srcs[shard] = src
		f, err := Parse(src, shard)
		if err != nil {
			return err
		}
		c.files = append(c.files, f)
	}
	// First duplicates across shards, then agreement with the weight_map.
	for _, f := range c.files {
		for _, n := range sortedKeys(f.Tensors) {
			if prev, dup := c.tensors[n]; dup {
				return &FormatError{File: f.Name, Tensor: n, Offset: -1, Msg: fmt.Sprintf("duplicate tensor: also present in shard %s", prev.Shard)}
			}
			c.tensors[n] = f.Tensors[n]
		}
	}
	for _, f := range c.files {
		for _, n := range sortedKeys(f.Tensors) {
			want, ok := ix.WeightMap[n]
			if !ok {
				return &FormatError{File: f.Name, Tensor: n, Offset: -1, Msg: fmt.Sprintf("tensor in shard is not listed in %s weight_map", IndexFileName)}
			}
			if want != f.Name {
				return &FormatError{File: f.Name, Tensor: n, Offset: -1, Msg: fmt.Sprintf("tensor found in this shard but %s weight_map assigns it to %s", IndexFileName, want)}
			}
		}
	}
	var missing []string
	for n, shard := range ix.WeightMap {
		if t, ok := c.tensors[n]; !ok || t.Shard != shard {
			missing = append(missing, n)
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		n := missing[0]
		more := ""
		if len(missing) > 1 {
			more = fmt.Sprintf(" (and %d more missing tensors)", len(missing)-1)
		}
		return &FormatError{File: ix.WeightMap[n], Tensor: n, Offset: -1,
			Msg: fmt.Sprintf("tensor listed in %s weight_map is missing from its shard%s", IndexFileName, more)}
	}
	c.Metadata = map[string]string{}
	if len(c.files) > 0 {
		for k, v := range c.files[0].Metadata {
			c.Metadata[k] = v
		}
	}
	for k, v := range ix.Metadata {
		c.Metadata[k] = v
	}
	return nil
}

// readAll copies a whole small Source, refusing more than limit bytes. It
// always copies, so the result outlives the Source.
func readAll(src Source, name string, limit int64) ([]byte, error) {
	n := src.Size()
	if n > limit {
		return nil, &FormatError{File: name, Offset: -1, Msg: fmt.Sprintf("file is %d bytes, over the %d-byte limit", n, limit)}
	}
	if n < 0 {
		return nil, &FormatError{File: name, Offset: -1, Msg: fmt.Sprintf("source reports negative size %d", n)}
	}
	buf := make([]byte, n)
	if err := readAtFull(src, buf, 0); err != nil {
		return nil, fmt.Errorf("safetensors: reading %s: %w", name, err)
	}
	return buf, nil
}

// OpenDir opens the checkpoint in directory dir (see Open), memory-mapping
// the files where the platform allows.
func OpenDir(dir string) (*Checkpoint, error) {
	return Open(DirOpener(dir))
}

// Names returns all tensor names, sorted.
func (c *Checkpoint) Names() []string {
	out := make([]string, 0, len(c.tensors))
	for n := range c.tensors {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Tensor returns the named tensor's description.
func (c *Checkpoint) Tensor(name string) (*Tensor, bool) {
	t, ok := c.tensors[name]
	return t, ok
}

// Files returns the parsed files (one, or one per shard), sorted by name.
func (c *Checkpoint) Files() []*File {
	return append([]*File(nil), c.files...)
}

func (c *Checkpoint) lookup(name string) (*Tensor, Source, error) {
	if c.closed {
		return nil, nil, fmt.Errorf("safetensors: tensor %q: checkpoint is closed", name)
	}
	t, ok := c.tensors[name]
	if !ok {
		return nil, nil, fmt.Errorf("safetensors: no tensor %q in checkpoint", name)
	}
	return t, c.srcs[t.Shard], nil
}

// Bytes returns the raw little-endian data of the named tensor. When the
// source is in memory or memory-mapped it is a sub-slice of it, without
// copying: do not modify it (mapped memory is read-only), and do not use it
// after Close. Otherwise the data is read into a new slice.
func (c *Checkpoint) Bytes(name string) ([]byte, error) {
	t, src, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	if bs, ok := src.(byteser); ok {
		b := bs.Bytes()
		if t.Offset+t.Size > int64(len(b)) {
			return nil, fmt.Errorf("safetensors: %s: tensor %q: data [%d, %d) beyond the %d-byte source", t.Shard, name, t.Offset, t.Offset+t.Size, len(b))
		}
		return b[t.Offset : t.Offset+t.Size : t.Offset+t.Size], nil
	}
	if uint64(t.Size) > math.MaxInt {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %d bytes do not fit in memory", t.Shard, name, t.Size)
	}
	buf := make([]byte, t.Size)
	if err := readFull(src, buf, t); err != nil {
		return nil, err
	}
	return buf, nil
}

func readFull(src Source, buf []byte, t *Tensor) error {
	err := readAtFull(src, buf, t.Offset)
	if err == nil {
		return nil
	}
	return fmt.Errorf("safetensors: %s: tensor %q: reading %d bytes at offset %d: %w", t.Shard, t.Name, len(buf), t.Offset, err)
}

// Float32 returns the named tensor converted to a new float32 slice. F32,
// F16, BF16 and F64 tensors are supported.
func (c *Checkpoint) Float32(name string) ([]float32, error) {
	t, _, err := c.lookup(name)
	if err != nil {
		return nil, err
	}
	if err := checkFloat(t); err != nil {
		return nil, err
	}
	n := t.NumElements()
	if uint64(n) > math.MaxInt {
		return nil, fmt.Errorf("safetensors: %s: tensor %q: %d elements do not fit in memory", t.Shard, name, n)
	}
	dst := make([]float32, n)
	if err := c.ReadFloat32(name, dst); err != nil {
		return nil, err
	}
	return dst, nil
}

// CheckFloat32 returns the error Float32 would give the named tensor
// before reading any of its data (a missing tensor, a closed checkpoint, a
// dtype it cannot convert), from the header alone.
func (c *Checkpoint) CheckFloat32(name string) error {
	t, _, err := c.lookup(name)
	if err != nil {
		return err
	}
	return checkFloat(t)
}

func checkFloat(t *Tensor) error {
	if !t.DType.ConvertibleToFloat32() {
		return fmt.Errorf("safetensors: %s: tensor %q: dtype %s cannot be converted to float32 (supported: F32, F16, BF16, F64)", t.Shard, t.Name, t.DType)
	}
	return nil
}

// readChunk bounds the scratch buffer used when the source is not in memory.
const readChunk = 1 << 20

// ReadFloat32 converts the named tensor into dst, whose length must equal
// the tensor's element count. F32, F16, BF16 and F64 tensors are supported.
func (c *Checkpoint) ReadFloat32(name string, dst []float32) error {
	t, src, err := c.lookup(name)
	if err != nil {
		return err
	}
	if err := checkFloat(t); err != nil {
		return err
	}
	if n := t.NumElements(); int64(len(dst)) != n {
		return fmt.Errorf("safetensors: %s: tensor %q: destination has %d elements, tensor has %d (shape %v)", t.Shard, name, len(dst), n, t.Shape)
	}
	es := t.DType.ElemSize()
	if _, ok := src.(byteser); ok {
		b, err := c.Bytes(name)
		if err != nil {
			return err
		}
		decodeFloat32(t.DType, dst, b)
		return nil
	}
	per := readChunk / es
	buf := make([]byte, min(len(dst), per)*es)
	for i := 0; i < len(dst); i += per {
		m := min(per, len(dst)-i)
		chunk := buf[:m*es]
		sub := *t
		sub.Offset = t.Offset + int64(i*es)
		if err := readFull(src, chunk, &sub); err != nil {
			return err
		}
		decodeFloat32(t.DType, dst[i:i+m], chunk)
	}
	return nil
}

// Close releases the sources (unmapping memory-mapped files). Slices
// returned by Bytes must not be used afterwards.
func (c *Checkpoint) Close() error {
	if c.closed {
		return nil
	}
	c.closed = true
	var errs []error
	for _, src := range c.srcs {
		if cl, ok := src.(io.Closer); ok {
			if err := cl.Close(); err != nil {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

func sortedKeys(m map[string]*Tensor) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
