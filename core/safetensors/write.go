package safetensors

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"unicode/utf8"

	"github.com/tessera-llm/tessera/core/half"
)

// WriteTensor is a tensor to write. Data holds the values in row-major order
// and is encoded as DType (F32, F16 or BF16; F16 and BF16 round to nearest
// even; I8 and U8 take integers in their range). len(Data) must equal the
// product of Shape.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int
	Data  []float32 // encoded as DType on write (I8: integers in [-128, 127], U8: in [0, 255])
}

// byteSize validates t and returns its encoded size.
func (t *WriteTensor) byteSize() (int64, error) {
	if t.Name == "" {
		return 0, errors.New("safetensors: write: tensor with empty name")
	}
	if !utf8.ValidString(t.Name) {
		return 0, fmt.Errorf("safetensors: write: tensor name %q is not valid UTF-8", t.Name)
	}
	if t.Name == "__metadata__" {
		return 0, errors.New("safetensors: write: \"__metadata__\" is reserved and cannot name a tensor")
	}
	switch t.DType {
	case F32, F16, BF16:
	case I8:
		for i, v := range t.Data {
			if v != float32(int8(v)) || v < -128 || v > 127 {
				return 0, fmt.Errorf("safetensors: write: tensor %q: value %d (%g) is not an int8", t.Name, i, v)
			}
		}
	case U8:
		for i, v := range t.Data {
			if v != float32(uint8(v)) || v < 0 || v > 255 {
				return 0, fmt.Errorf("safetensors: write: tensor %q: value %d (%g) is not a uint8", t.Name, i, v)
			}
		}
	default:
		return 0, fmt.Errorf("safetensors: write: tensor %q: dtype %q cannot be written (supported: F32, F16, BF16, I8, U8)", t.Name, string(t.DType))
	}
	n := int64(1)
	for i, d := range t.Shape {
		if d < 0 {
			return 0, fmt.Errorf("safetensors: write: tensor %q: shape[%d] is negative (%d)", t.Name, i, d)
		}
		if d != 0 && n > math.MaxInt64/int64(d) {
			return 0, fmt.Errorf("safetensors: write: tensor %q: shape %v overflows", t.Name, t.Shape)
		}
		n *= int64(d)
	}
	if int64(len(t.Data)) != n {
		return 0, fmt.Errorf("safetensors: write: tensor %q: %d values for shape %v, which needs %d", t.Name, len(t.Data), t.Shape, n)
	}
	return t.DType.byteSize(n)
}

// sortedTensors validates tensors and returns them sorted by name with their
// byte sizes.
func sortedTensors(tensors []WriteTensor) ([]*WriteTensor, []int64, error) {
	ts := make([]*WriteTensor, len(tensors))
	for i := range tensors {
		ts[i] = &tensors[i]
	}
	sort.SliceStable(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	sizes := make([]int64, len(ts))
	for i, t := range ts {
		if i > 0 && ts[i-1].Name == t.Name {
			return nil, nil, fmt.Errorf("safetensors: write: duplicate tensor name %q", t.Name)
		}
		s, err := t.byteSize()
		if err != nil {
			return nil, nil, err
		}
		sizes[i] = s
	}
	return ts, sizes, nil
}

// Write writes tensors and metadata as one safetensors file to w. Tensors
// are stored in name order and the header is padded with spaces to a
// multiple of 8 bytes, so the data region is 8-byte aligned and the output
// is deterministic. Empty metadata omits "__metadata__".
func Write(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	ts, sizes, err := sortedTensors(tensors)
	if err != nil {
		return err
	}
	return writeSorted(w, ts, sizes, metadata)
}

func writeSorted(w io.Writer, ts []*WriteTensor, sizes []int64, metadata map[string]string) error {
	var h bytes.Buffer
	h.WriteByte('{')
	for k, v := range metadata {
		if !utf8.ValidString(k) || !utf8.ValidString(v) {
			return fmt.Errorf("safetensors: write: metadata %q: %q: key and value must be valid UTF-8", k, v)
		}
	}
	if len(metadata) > 0 {
		m, err := json.Marshal(metadata) // keys sorted
		if err != nil {
			return fmt.Errorf("safetensors: write: metadata: %w", err)
		}
		h.WriteString(`"__metadata__":`)
		h.Write(m)
	}
	var off int64
	for i, t := range ts {
		if h.Len() > 1 {
			h.WriteByte(',')
		}
		name, err := json.Marshal(t.Name)
		if err != nil {
			return fmt.Errorf("safetensors: write: tensor name %q: %w", t.Name, err)
		}
		h.Write(name)
		h.WriteString(`:{"dtype":"`)
		h.WriteString(string(t.DType))
		h.WriteString(`","shape":[`)
		for j, d := range t.Shape {
			if j > 0 {
				h.WriteByte(',')
			}
			h.WriteString(strconv.Itoa(d))
		}
		fmt.Fprintf(&h, `],"data_offsets":[%d,%d]}`, off, off+sizes[i])
		off += sizes[i]
	}
	h.WriteByte('}')
	for h.Len()%8 != 0 {
		h.WriteByte(' ')
	}

	bw := bufio.NewWriterSize(w, 1<<16)
	var pre [8]byte
	binary.LittleEndian.PutUint64(pre[:], uint64(h.Len()))
	bw.Write(pre[:])
	bw.Write(h.Bytes())
	var scratch [8]byte
	for _, t := range ts {
		switch t.DType {
		case F32:
			for _, v := range t.Data {
				binary.LittleEndian.PutUint32(scratch[:], math.Float32bits(v))
				bw.Write(scratch[:4])
			}
		case F16:
			for _, v := range t.Data {
				binary.LittleEndian.PutUint16(scratch[:], half.F32ToF16(v))
				bw.Write(scratch[:2])
			}
		case BF16:
			for _, v := range t.Data {
				binary.LittleEndian.PutUint16(scratch[:], half.F32ToBF16(v))
				bw.Write(scratch[:2])
			}
		case I8:
			for _, v := range t.Data {
				bw.WriteByte(byte(int8(v)))
			}
		case U8:
			for _, v := range t.Data {
				bw.WriteByte(byte(v))
			}
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	return nil
}

// ShardName returns the Hugging Face shard file name for shard i (1-based)
// of n: "model-0000i-of-0000n.safetensors".
func ShardName(i, n int) string {
	return fmt.Sprintf("model-%05d-of-%05d.safetensors", i, n)
}

// WriteDir writes tensors to directory dir (which must exist). If
// maxShardBytes <= 0 or the total data size is at most maxShardBytes it
// writes one model.safetensors (removing a stale model.safetensors.index.json,
// which Open would otherwise prefer). Otherwise it packs tensors in name
// order into shards of at most maxShardBytes of data each (a larger tensor
// gets a shard of its own), named as by ShardName, plus
// model.safetensors.index.json with {"metadata": {"total_size": N},
// "weight_map": {...}}. metadata is written into every file's header.
func WriteDir(dir string, tensors []WriteTensor, metadata map[string]string, maxShardBytes int64) error {
	ts, sizes, err := sortedTensors(tensors)
	if err != nil {
		return err
	}
	var total int64
	for _, s := range sizes {
		total += s
	}
	if maxShardBytes <= 0 || total <= maxShardBytes {
		if err := writeFile(filepath.Join(dir, SingleFileName), ts, sizes, metadata); err != nil {
			return err
		}
		if err := os.Remove(filepath.Join(dir, IndexFileName)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("safetensors: removing stale index: %w", err)
		}
		return nil
	}

	type shard struct{ lo, hi int } // ts[lo:hi]
	var shards []shard
	var cur int64
	for i, s := range sizes {
		if len(shards) == 0 || (cur+s > maxShardBytes && cur > 0) {
			shards = append(shards, shard{lo: i, hi: i})
			cur = 0
		}
		shards[len(shards)-1].hi = i + 1
		cur += s
	}
	weightMap := make(map[string]string, len(ts))
	for k, sh := range shards {
		name := ShardName(k+1, len(shards))
		if err := writeFile(filepath.Join(dir, name), ts[sh.lo:sh.hi], sizes[sh.lo:sh.hi], metadata); err != nil {
			return err
		}
		for _, t := range ts[sh.lo:sh.hi] {
			weightMap[t.Name] = name
		}
	}
	ix, err := json.MarshalIndent(struct {
		Metadata  map[string]int64  `json:"metadata"`
		WeightMap map[string]string `json:"weight_map"`
	}{map[string]int64{"total_size": total}, weightMap}, "", "  ")
	if err != nil {
		return fmt.Errorf("safetensors: write index: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, IndexFileName), append(ix, '\n'), 0o644); err != nil {
		return fmt.Errorf("safetensors: write index: %w", err)
	}
	return nil
}

func writeFile(path string, ts []*WriteTensor, sizes []int64, metadata map[string]string) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("safetensors: %w", err)
	}
	if err := writeSorted(f, ts, sizes, metadata); err != nil {
		f.Close()
		return fmt.Errorf("%w (writing %s)", err, path)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("safetensors: closing %s: %w", path, err)
	}
	return nil
}
