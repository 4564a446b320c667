package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
)

// Writer collects metadata and tensor infos and then writes a GGUF file in
// one pass. Tensor data is produced on demand (one tensor in memory at a
// time), so files larger than memory can be written.
type Writer struct {
	kvs       []KV
	keys      map[string]bool
	tensors   []writeTensor
	names     map[string]bool
	alignment uint64
}

type writeTensor struct {
	name string
	typ  GGMLType
	ne   []uint64
	size uint64
	data func() ([]byte, error)
}

// NewWriter returns an empty writer with DefaultAlignment.
func NewWriter() *Writer {
	return &Writer{keys: map[string]bool{}, names: map[string]bool{}, alignment: DefaultAlignment}
}

// SetAlignment sets the data alignment (a power of two) and records it as
// general.alignment; with the default 32 no key is written.
func (w *Writer) SetAlignment(a uint32) error {
	if a == 0 || a&(a-1) != 0 {
		return fmt.Errorf("gguf: alignment %d is not a power of two", a)
	}
	if w.keys[KeyAlignment] {
		return fmt.Errorf("gguf: key %s set twice", KeyAlignment)
	}
	w.alignment = uint64(a)
	if a != DefaultAlignment {
		return w.Add(KeyAlignment, a)
	}
	return nil
}

// Add appends one metadata entry; v must be one of the types listed on KV.
// Keys must be unique and non-empty.
func (w *Writer) Add(key string, v any) error {
	if key == "" {
		return errors.New("gguf: empty metadata key")
	}
	if w.keys[key] {
		return fmt.Errorf("gguf: key %s set twice", key)
	}
	if _, _, ok := TypeOf(v); !ok {
		return fmt.Errorf("gguf: key %s: Go type %T has no GGUF value type", key, v)
	}
	if key == KeyAlignment {
		a, ok := v.(uint32)
		if !ok || a == 0 || a&(a-1) != 0 {
			return fmt.Errorf("gguf: key %s: want a uint32 power of two, got %v (%T)", key, v, v)
		}
		w.alignment = uint64(a)
	}
	w.keys[key] = true
	w.kvs = append(w.kvs, KV{Key: key, Value: v})
	return nil
}

// AddTensor appends a tensor info. ne is in ggml order (ne[0] varies
// fastest: a PyTorch [rows, cols] matrix is ne [cols, rows]). data is
// called once while the file is written and must return exactly the
// tensor's byte size (TensorBytes).
func (w *Writer) AddTensor(name string, typ GGMLType, ne []uint64, data func() ([]byte, error)) error {
	if name == "" || len(name) > MaxNameLen {
		return fmt.Errorf("gguf: tensor name %q: length must be 1..%d", name, MaxNameLen)
	}
	if w.names[name] {
		return fmt.Errorf("gguf: tensor %s added twice", name)
	}
	size, err := TensorBytes(typ, ne)
	if err != nil {
		return fmt.Errorf("gguf: tensor %s: %w", name, err)
	}
	w.names[name] = true
	w.tensors = append(w.tensors, writeTensor{name: name, typ: typ, ne: append([]uint64(nil), ne...), size: size, data: data})
	return nil
}

// NumTensors is the number of tensors added so far.
func (w *Writer) NumTensors() int { return len(w.tensors) }

// WriteTo writes the file: header, metadata, tensor infos, padding to the
// alignment, then each tensor's data (each start aligned). It returns the
// number of bytes written.
func (w *Writer) WriteTo(out io.Writer) (int64, error) {
	cw := &countWriter{w: out}
	bw := bufio.NewWriterSize(cw, 1<<20)
	e := &encoder{w: bw}
	e.u32(Magic)
	e.u32(Version)
	e.u64(uint64(len(w.tensors)))
	e.u64(uint64(len(w.kvs)))
	for _, kv := range w.kvs {
		e.str(kv.Key)
		e.value(kv.Value)
	}
	var off uint64
	for _, t := range w.tensors {
		e.str(t.name)
		e.u32(uint32(len(t.ne)))
		for _, d := range t.ne {
			e.u64(d)
		}
		e.u32(uint32(t.typ))
		e.u64(off)
		next, ok := alignUp(off+t.size, w.alignment)
		if !ok {
			return cw.n, errors.New("gguf: tensor data exceeds 2^63 bytes")
		}
		off = next
	}
	if e.err != nil {
		return cw.n, e.err
	}
	if err := bw.Flush(); err != nil {
		return cw.n, err
	}
	if err := w.pad(bw, cw); err != nil {
		return cw.n, err
	}
	for _, t := range w.tensors {
		b, err := t.data()
		if err != nil {
			return cw.n, fmt.Errorf("gguf: tensor %s: %w", t.name, err)
		}
		if uint64(len(b)) != t.size {
			return cw.n, fmt.Errorf("gguf: tensor %s: data is %d bytes, its type %s and shape %v need %d", t.name, len(b), t.typ, t.ne, t.size)
		}
		if _, err := bw.Write(b); err != nil {
			return cw.n, err
		}
		if err := bw.Flush(); err != nil {
			return cw.n, err
		}
		if err := w.pad(bw, cw); err != nil {
			return cw.n, err
		}
	}
	return cw.n, bw.Flush()
}

// pad writes zeros up to the next multiple of the alignment.
func (w *Writer) pad(bw *bufio.Writer, cw *countWriter) error {
	n := uint64(cw.n) + uint64(bw.Buffered())
	next, _ := alignUp(n, w.alignment)
	if next > n {
		if _, err := bw.Write(make([]byte, next-n)); err != nil {
			return err
		}
	}
	return bw.Flush()
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// encoder writes little-endian GGUF primitives, keeping the first error.
type encoder struct {
	w   io.Writer
	err error
	buf [8]byte
}

func (e *encoder) write(b []byte) {
	if e.err == nil {
		_, e.err = e.w.Write(b)
	}
}

func (e *encoder) u8(v uint8) { e.buf[0] = v; e.write(e.buf[:1]) }
func (e *encoder) u16(v uint16) {
	binary.LittleEndian.PutUint16(e.buf[:2], v)
	e.write(e.buf[:2])
}
func (e *encoder) u32(v uint32) {
	binary.LittleEndian.PutUint32(e.buf[:4], v)
	e.write(e.buf[:4])
}
func (e *encoder) u64(v uint64) {
	binary.LittleEndian.PutUint64(e.buf[:8], v)
	e.write(e.buf[:8])
}
func (e *encoder) str(s string) {
	e.u64(uint64(len(s)))
	if e.err == nil {
		_, e.err = io.WriteString(e.w, s)
	}
}

func (e *encoder) boolean(b bool) {
	if b {
		e.u8(1)
	} else {
		e.u8(0)
	}
}

// value writes a value's type tag and payload (v is validated by Add).
func (e *encoder) value(v any) {
	t, elem, _ := TypeOf(v)
	e.u32(uint32(t))
	if t != TypeArray {
		e.scalar(v)
		return
	}
	e.u32(uint32(elem))
	if b, ok := v.([]uint8); ok {
		e.u64(uint64(len(b)))
		e.write(b)
		return
	}
	a := reflect.ValueOf(v)
	e.u64(uint64(a.Len()))
	for i := 0; i < a.Len(); i++ {
		e.scalar(a.Index(i).Interface())
	}
}

// scalar writes the payload of a non-array value.
func (e *encoder) scalar(v any) {
	switch x := v.(type) {
	case uint8:
		e.u8(x)
	case int8:
		e.u8(uint8(x))
	case uint16:
		e.u16(x)
	case int16:
		e.u16(uint16(x))
	case uint32:
		e.u32(x)
	case int32:
		e.u32(uint32(x))
	case float32:
		e.u32(math.Float32bits(x))
	case bool:
		e.boolean(x)
	case string:
		e.str(x)
	case uint64:
		e.u64(x)
	case int64:
		e.u64(uint64(x))
	case float64:
		e.u64(math.Float64bits(x))
	}
}
