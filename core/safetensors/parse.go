// Package safetensors reads and writes checkpoints in the safetensors
// format, single-file or sharded with a model.safetensors.index.json, from
// any random-access Source: a memory-mapped file natively, or bytes fetched
// by a browser. The same loader serves both.
//
// A safetensors file is an 8-byte little-endian header length N, N bytes of
// JSON header mapping tensor names to {"dtype", "shape", "data_offsets"}
// (plus an optional "__metadata__" object of strings), then the data region;
// data_offsets are relative to the start of the data region (byte 8+N).
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
)

// MaxHeaderSize is the largest JSON header Parse accepts (100 MiB).
const MaxHeaderSize = 100 << 20

// MaxTensors is the most tensors one file may declare (1,048,576; a
// trillion-parameter MoE has ~10^5 in all its shards together). It bounds
// the memory a header of tiny entries can make Parse allocate.
const MaxTensors = 1 << 20

// FormatError describes malformed checkpoint content. Every error Parse,
// ParseIndex and Open return for bad content is (or wraps) a *FormatError.
type FormatError struct {
	File   string // file name as given to Parse or the Opener
	Tensor string // tensor name, or "" when the problem is not tensor-specific
	Offset int64  // absolute byte offset in File, or -1 when not known
	Msg    string // what is wrong
}

// Error formats the error as "safetensors: FILE: tensor "T": MSG (at byte OFF)".
func (e *FormatError) Error() string {
	var b bytes.Buffer
	b.WriteString("safetensors: ")
	if e.File != "" {
		b.WriteString(e.File)
		b.WriteString(": ")
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Msg)
	if e.Offset >= 0 {
		fmt.Fprintf(&b, " (at byte offset %d)", e.Offset)
	}
	return b.String()
}

// Tensor describes one tensor stored in a Source.
type Tensor struct {
	Name   string
	DType  DType
	Shape  []int
	Offset int64  // absolute byte offset of the data in its Source
	Size   int64  // data size in bytes
	Shard  string // name of the file holding the tensor
}

// NumElements returns the product of the shape (1 for a scalar).
func (t *Tensor) NumElements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= int64(d) // validated not to overflow by Parse
	}
	return n
}

// File is one parsed safetensors file.
type File struct {
	Name     string             // file name (as passed to Parse)
	Src      Source             // the bytes
	Tensors  map[string]*Tensor // by tensor name
	Metadata map[string]string  // the "__metadata__" object; never nil
	DataOff  int64              // absolute offset of the data region (8+N)
}

type rawEntry struct {
	DType       *string            `json:"dtype"`
	Shape       *[]json.RawMessage `json:"shape"`
	DataOffsets *[]json.RawMessage `json:"data_offsets"`
}

// Parse reads and validates the header of the safetensors file src. name is
// used in error messages and as Tensor.Shard. Parse checks that the header
// fits in the file, is valid JSON without duplicate names, that every entry
// has a known dtype, a non-negative shape and data_offsets that lie inside
// the data region, match the dtype and shape exactly and do not overlap
// another tensor. The data itself is not read.
func Parse(src Source, name string) (*File, error) {
	ferr := func(tensor string, off int64, format string, args ...any) error {
		return &FormatError{File: name, Tensor: tensor, Offset: off, Msg: fmt.Sprintf(format, args...)}
	}
	size := src.Size()
	if size < 8 {
		return nil, ferr("", -1, "file is %d bytes, shorter than the 8-byte header length prefix (truncated file?)", size)
	}
	var pre [8]byte
	if err := readAtFull(src, pre[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading header length: %w", name, err)
	}
	n := binary.LittleEndian.Uint64(pre[:])
	if n > uint64(size-8) {
		return nil, ferr("", 0, "header length %d exceeds the %d bytes after the length prefix (truncated file or not a safetensors file)", n, size-8)
	}
	if n > MaxHeaderSize {
		return nil, ferr("", 0, "header length %d exceeds the %d-byte limit", n, MaxHeaderSize)
	}
	if n < 2 {
		return nil, ferr("", 8, "header length %d is too small for a JSON object", n)
	}
	hdr := make([]byte, n)
	if err := readAtFull(src, hdr, 8); err != nil {
		return nil, fmt.Errorf("safetensors: %s: reading %d-byte header: %w", name, n, err)
	}
	dataOff := 8 + int64(n)
	dataLen := size - dataOff

	f := &File{Name: name, Src: src, Tensors: map[string]*Tensor{}, Metadata: map[string]string{}, DataOff: dataOff}
	sawMeta := false
	err := decodeObject(hdr, func(key string, valOff int64, raw json.RawMessage) error {
		at := 8 + valOff
		if key == "__metadata__" {
			if sawMeta {
				return ferr("", at, "duplicate \"__metadata__\" key")
			}
			sawMeta = true
			if err := json.Unmarshal(raw, &f.Metadata); err != nil {
				return ferr("", at, "__metadata__ must be an object of string values: %v", err)
			}
			if f.Metadata == nil { // "__metadata__": null
				f.Metadata = map[string]string{}
			}
			return nil
		}
		if key == "" {
			return ferr("", at, "empty tensor name")
		}
		if _, dup := f.Tensors[key]; dup {
			return ferr(key, at, "duplicate tensor name in header")
		}
		if len(f.Tensors) >= MaxTensors {
			return ferr(key, at, "header declares more than %d tensors", MaxTensors)
		}
		t, err := parseEntry(key, raw, dataOff, dataLen)
		if err != nil {
			return ferr(key, at, "%v", err)
		}
		t.Shard = name
		f.Tensors[key] = t
		return nil
	})
	if err != nil {
		var fe *FormatError
		if errors.As(err, &fe) {
			return nil, err
		}
		var se *offsetError
		if errors.As(err, &se) {
			return nil, ferr("", 8+se.off, "invalid JSON header: %v", se.err)
		}
		return nil, ferr("", -1, "invalid JSON header: %v", err)
	}
	if err := checkOverlaps(f); err != nil {
		return nil, err
	}
	return f, nil
}

// readAtFull fills buf from src at off. Like io.ReadFull it accepts io.EOF
// together with a complete read, and reports a short read as
// io.ErrUnexpectedEOF.
func readAtFull(src io.ReaderAt, buf []byte, off int64) error {
	n, err := src.ReadAt(buf, off)
	if n == len(buf) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// parseEntry validates one tensor entry of the header.
func parseEntry(name string, raw json.RawMessage, dataOff, dataLen int64) (*Tensor, error) {
	var e rawEntry
	if err := json.Unmarshal(raw, &e); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field == "" {
			return nil, fmt.Errorf("entry must be a JSON object, got %s", te.Value)
		}
		return nil, fmt.Errorf("malformed entry: %v", err)
	}
	switch {
	case e.DType == nil:
		return nil, errors.New("entry is missing \"dtype\"")
	case e.Shape == nil:
		return nil, errors.New("entry is missing \"shape\"")
	case e.DataOffsets == nil:
		return nil, errors.New("entry is missing \"data_offsets\"")
	}
	dt, err := ParseDType(*e.DType)
	if err != nil {
		return nil, err
	}
	shape := make([]int, len(*e.Shape))
	numel := int64(1)
	for i, r := range *e.Shape {
		d, err := parseInt(r)
		if err != nil {
			return nil, fmt.Errorf("shape[%d]: %v", i, err)
		}
		if d < 0 {
			return nil, fmt.Errorf("shape[%d] is negative (%d)", i, d)
		}
		if d > math.MaxInt || (d != 0 && numel > math.MaxInt64/d) {
			return nil, fmt.Errorf("shape %s: element count overflows", shapeString(*e.Shape))
		}
		shape[i] = int(d)
		numel *= d
	}
	if len(*e.DataOffsets) != 2 {
		return nil, fmt.Errorf("data_offsets must have 2 elements [begin, end], got %d", len(*e.DataOffsets))
	}
	begin, err := parseInt((*e.DataOffsets)[0])
	if err != nil {
		return nil, fmt.Errorf("data_offsets[0]: %v", err)
	}
	end, err := parseInt((*e.DataOffsets)[1])
	if err != nil {
		return nil, fmt.Errorf("data_offsets[1]: %v", err)
	}
	if begin < 0 || end < 0 {
		return nil, fmt.Errorf("data_offsets [%d, %d] are negative", begin, end)
	}
	if begin > end {
		return nil, fmt.Errorf("data_offsets begin %d > end %d", begin, end)
	}
	if end > dataLen {
		return nil, fmt.Errorf("data_offsets end %d is beyond the %d-byte data region (offsets out of range; truncated file?)", end, dataLen)
	}
	want, err := dt.byteSize(numel)
	if err != nil {
		return nil, fmt.Errorf("shape %v: %v", shape, err)
	}
	if end-begin != want {
		return nil, fmt.Errorf("byte size %d (data_offsets [%d, %d]) does not match dtype %s and shape %v, which need %d bytes", end-begin, begin, end, dt, shape, want)
	}
	return &Tensor{Name: name, DType: dt, Shape: shape, Offset: dataOff + begin, Size: end - begin}, nil
}

// parseInt parses a JSON integer literal (no fraction, exponent or quotes).
func parseInt(r json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(r))
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%.40q is not an integer in int64 range", s)
	}
	return v, nil
}

func shapeString(s []json.RawMessage) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// checkOverlaps reports tensors whose byte ranges intersect.
func checkOverlaps(f *File) error {
	ts := make([]*Tensor, 0, len(f.Tensors))
	for _, t := range f.Tensors {
		if t.Size > 0 {
			ts = append(ts, t)
		}
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Offset != ts[j].Offset {
			return ts[i].Offset < ts[j].Offset
		}
		return ts[i].Name < ts[j].Name
	})
	for i := 1; i < len(ts); i++ {
		a, b := ts[i-1], ts[i]
		if b.Offset < a.Offset+a.Size {
			return &FormatError{File: f.Name, Tensor: b.Name, Offset: b.Offset, Msg: fmt.Sprintf(
				"data [%d, %d) overlaps tensor %q data [%d, %d) (overlapping data_offsets)",
				b.Offset-f.DataOff, b.Offset+b.Size-f.DataOff, a.Name, a.Offset-f.DataOff, a.Offset+a.Size-f.DataOff)}
		}
	}
	return nil
}

// offsetError is a JSON syntax error at a byte offset within the decoded text.
type offsetError struct {
	off int64
	err error
}

func (e *offsetError) Error() string { return e.err.Error() }

// decodeObject decodes data as one JSON object, calling fn for each member in
// order with the key, the byte offset of the value in data, and the raw value.
// Duplicate keys are passed to fn as they occur. Only whitespace may follow
// the object. Syntax errors are returned as *offsetError.
func decodeObject(data []byte, fn func(key string, valOff int64, raw json.RawMessage) error) error {
	// Validate the whole text first: json.Unmarshal reports syntax errors
	// with an exact offset (the Decoder's offsets are not reliable).
	var whole json.RawMessage
	if err := json.Unmarshal(data, &whole); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &offsetError{off: max(se.Offset-1, 0), err: err}
		}
		return &offsetError{off: 0, err: err}
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	wrap := func(err error) error {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return &offsetError{off: se.Offset, err: err}
		}
		return &offsetError{off: dec.InputOffset(), err: err}
	}
	tok, err := dec.Token()
	if err != nil {
		return wrap(err)
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return &offsetError{off: 0, err: fmt.Errorf("expected a JSON object, found %v", tokString(tok))}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return wrap(err)
		}
		key, ok := tok.(string)
		if !ok {
			return &offsetError{off: dec.InputOffset(), err: fmt.Errorf("expected a string key, found %v", tokString(tok))}
		}
		valOff := skipColon(data, dec.InputOffset())
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return wrap(err)
		}
		if err := fn(key, valOff, raw); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil { // closing '}'
		return wrap(err)
	}
	return nil
}

// skipColon returns the offset of the first byte after off that is neither
// JSON whitespace nor the ':' separating a key from its value.
func skipColon(data []byte, off int64) int64 {
	for off < int64(len(data)) {
		switch data[off] {
		case ' ', '\t', '\n', '\r', ':':
			off++
		default:
			return off
		}
	}
	return off
}

func tokString(t json.Token) string {
	switch v := t.(type) {
	case json.Delim:
		return fmt.Sprintf("%q", string(v))
	case string:
		return fmt.Sprintf("string %.40q", v)
	case nil:
		return "null"
	default:
		return fmt.Sprintf("%v", v)
	}
}
