package gguf

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"os"
	"reflect"
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// TensorInfo describes one tensor of a parsed file.
type TensorInfo struct {
	Name   string
	Type   GGMLType
	Ne     []uint64 // ggml order: Ne[0] varies fastest
	Offset uint64   // from the start of the data section (aligned)
	Size   uint64   // bytes
}

// NumElements is the product of Ne.
func (t *TensorInfo) NumElements() uint64 {
	n := uint64(1)
	for _, d := range t.Ne {
		n *= d // validated by Parse not to overflow
	}
	return n
}

// File is a parsed GGUF file. Metadata and tensor infos are in memory;
// tensor data is read from the source on request.
type File struct {
	Version    uint32
	KVs        []KV
	Tensors    []TensorInfo
	Alignment  uint64
	DataOffset uint64 // absolute offset of the data section

	src     io.ReaderAt
	size    uint64
	keys    map[string]int
	tensors map[string]int
	closer  io.Closer
}

// FormatError is a malformed or out-of-bounds GGUF file. Key or Tensor
// names the entry at fault when there is one.
type FormatError struct {
	Offset uint64 // byte offset where the problem was found
	Key    string
	Tensor string
	Msg    string
}

func (e *FormatError) Error() string {
	var b strings.Builder
	b.WriteString("gguf: ")
	if e.Key != "" {
		fmt.Fprintf(&b, "key %q: ", e.Key)
	}
	if e.Tensor != "" {
		fmt.Fprintf(&b, "tensor %q: ", e.Tensor)
	}
	b.WriteString(e.Msg)
	fmt.Fprintf(&b, " (at byte %d)", e.Offset)
	return b.String()
}

// Open memory-maps (or, where mapping is unavailable, opens) the file at
// path and parses it with DefaultLimits. Close releases it.
func Open(path string) (*File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("gguf: %s is not a regular file", path)
	}
	src, err := safetensors.OpenFile(path)
	if err != nil {
		return nil, err
	}
	f, err := Parse(src, src.Size(), Limits{})
	if err != nil {
		if c, ok := src.(io.Closer); ok {
			c.Close()
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if c, ok := src.(io.Closer); ok {
		f.closer = c
	}
	return f, nil
}

// Close releases the file opened by Open; it is a no-op for Parse.
func (f *File) Close() error {
	if f.closer == nil {
		return nil
	}
	c := f.closer
	f.closer = nil
	return c.Close()
}

// Parse reads the header, metadata and tensor infos of a GGUF file of
// size bytes from r, checking every bound before allocating. lim's zero
// fields take DefaultLimits.
func Parse(r io.ReaderAt, size int64, lim Limits) (*File, error) {
	if size < 0 {
		return nil, &FormatError{Msg: "negative file size"}
	}
	lim = lim.orDefault()
	d := &decoder{r: r, size: uint64(size), lim: lim}
	f := &File{src: r, size: uint64(size), keys: map[string]int{}, tensors: map[string]int{}}
	if err := d.header(f); err != nil {
		return nil, err
	}
	return f, nil
}

func (d *decoder) header(f *File) error {
	if d.size < 24 {
		return d.fail("", "", "file is %d bytes, shorter than a GGUF header (24)", d.size)
	}
	if m := d.u32(); m != Magic {
		return d.fail("", "", "bad magic %#08x (not a GGUF file)", m)
	}
	f.Version = d.u32()
	if f.Version != 2 && f.Version != 3 {
		return d.fail("", "", "GGUF version %d is not supported (want 2 or 3)", f.Version)
	}
	nT, nKV := d.u64(), d.u64()
	if d.err != nil {
		return d.err
	}
	if nKV > d.lim.MaxKVs {
		return d.fail("", "", "%d metadata entries exceed the limit %d", nKV, d.lim.MaxKVs)
	}
	if nT > d.lim.MaxTensors {
		return d.fail("", "", "%d tensors exceed the limit %d", nT, d.lim.MaxTensors)
	}
	// Smallest encodings: a KV is key length + 1 key byte + type + 1 byte;
	// a tensor info is name length + 1 byte + n_dims + one dim + type + offset.
	if nKV*14+nT*33 > d.remaining() {
		return d.fail("", "", "%d metadata entries and %d tensors cannot fit in the %d bytes left", nKV, nT, d.remaining())
	}
	f.KVs = make([]KV, 0, nKV)
	for i := uint64(0); i < nKV; i++ {
		at := d.pos
		key, err := d.str("", "key")
		if err != nil {
			return err
		}
		if key == "" {
			return d.failAt(at, "", "", "metadata entry %d has an empty key", i)
		}
		if _, dup := f.keys[key]; dup {
			return d.failAt(at, key, "", "duplicate key")
		}
		v, err := d.value(key)
		if err != nil {
			return d.name(err, key, "")
		}
		f.keys[key] = len(f.KVs)
		f.KVs = append(f.KVs, KV{Key: key, Value: v})
	}
	f.Alignment = DefaultAlignment
	if i, ok := f.keys[KeyAlignment]; ok {
		a, ok := f.KVs[i].Value.(uint32)
		if !ok {
			return d.fail(KeyAlignment, "", "is %T, want uint32", f.KVs[i].Value)
		}
		if a == 0 || a&(a-1) != 0 || a > d.lim.MaxAlignment {
			return d.fail(KeyAlignment, "", "%d is not a power of two up to %d", a, d.lim.MaxAlignment)
		}
		f.Alignment = uint64(a)
	}
	f.Tensors = make([]TensorInfo, 0, nT)
	for i := uint64(0); i < nT; i++ {
		t, err := d.tensorInfo(f.Alignment)
		if err != nil {
			return d.name(err, "", t.Name)
		}
		if _, dup := f.tensors[t.Name]; dup {
			return d.fail("", t.Name, "duplicate tensor name")
		}
		f.tensors[t.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, t)
	}
	data, ok := alignUp(d.pos, f.Alignment)
	if !ok || data > d.size {
		if nT == 0 && data >= d.size { // metadata-only file without padding
			data = d.size
		} else {
			return d.fail("", "", "data section would start at %d, past the end of the %d-byte file", data, d.size)
		}
	}
	f.DataOffset = data
	avail := d.size - data
	order := make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	sort.Slice(order, func(a, b int) bool { return f.Tensors[order[a]].Offset < f.Tensors[order[b]].Offset })
	var end uint64
	prev := ""
	for _, i := range order {
		t := &f.Tensors[i]
		if t.Offset > avail || t.Size > avail-t.Offset {
			return d.fail("", t.Name, "data [%d, %d) of the data section runs past the end of the file (%d bytes of data)", t.Offset, t.Offset+t.Size, avail)
		}
		if t.Offset < end && t.Size > 0 {
			return d.fail("", t.Name, "data at offset %d overlaps tensor %q (ends at %d)", t.Offset, prev, end)
		}
		if t.Offset+t.Size > end {
			end, prev = t.Offset+t.Size, t.Name
		}
	}
	return nil
}

func (d *decoder) tensorInfo(alignment uint64) (TensorInfo, error) {
	at := d.pos
	name, err := d.str("", "tensor name")
	if err != nil {
		return TensorInfo{}, err
	}
	if name == "" || len(name) > MaxNameLen {
		return TensorInfo{}, d.failAt(at, "", name, "name length %d is not in 1..%d", len(name), MaxNameLen)
	}
	nd := d.u32()
	if d.err != nil {
		return TensorInfo{Name: name}, d.err
	}
	if nd == 0 || nd > MaxDims {
		return TensorInfo{}, d.fail("", name, "%d dimensions (want 1..%d)", nd, MaxDims)
	}
	ne := make([]uint64, nd)
	for j := range ne {
		ne[j] = d.u64()
	}
	typ := GGMLType(d.u32())
	off := d.u64()
	if d.err != nil {
		return TensorInfo{Name: name}, d.err
	}
	if !typ.Known() {
		return TensorInfo{}, d.fail("", name, "unknown ggml type %d", uint32(typ))
	}
	size, err := TensorBytes(typ, ne)
	if err != nil {
		return TensorInfo{}, d.fail("", name, "%v", err)
	}
	if off%alignment != 0 {
		return TensorInfo{}, d.fail("", name, "data offset %d is not a multiple of the alignment %d", off, alignment)
	}
	return TensorInfo{Name: name, Type: typ, Ne: ne, Offset: off, Size: size}, nil
}

// name fills in the key or tensor an error (such as an early end of
// file) was met in, when the error does not name one yet.
func (d *decoder) name(err error, key, tensor string) error {
	if fe, ok := err.(*FormatError); ok && fe.Key == "" && fe.Tensor == "" {
		fe.Key, fe.Tensor = key, tensor
	}
	return err
}

// decoder reads GGUF primitives from a ReaderAt through a window buffer,
// keeping the first error.
type decoder struct {
	r      io.ReaderAt
	size   uint64
	pos    uint64
	lim    Limits
	err    error
	win    []byte
	winOff uint64
}

const windowSize = 64 << 10

func (d *decoder) remaining() uint64 { return d.size - d.pos }

func (d *decoder) fail(key, tensor, format string, args ...any) error {
	return d.failAt(d.pos, key, tensor, format, args...)
}

func (d *decoder) failAt(at uint64, key, tensor, format string, args ...any) error {
	if d.err == nil {
		d.err = &FormatError{Offset: at, Key: key, Tensor: tensor, Msg: fmt.Sprintf(format, args...)}
	}
	return d.err
}

// next returns the next n bytes (valid until the next call), or nil after
// recording an error if the file ends first.
func (d *decoder) next(n uint64) []byte {
	if d.err != nil {
		return nil
	}
	if n > d.remaining() {
		d.fail("", "", "unexpected end of file: need %d bytes, %d left", n, d.remaining())
		return nil
	}
	if d.pos >= d.winOff && d.pos+n <= d.winOff+uint64(len(d.win)) {
		b := d.win[d.pos-d.winOff : d.pos-d.winOff+n]
		d.pos += n
		return b
	}
	if n > windowSize {
		b := make([]byte, n) // bounded by remaining() above
		if err := readFull(d.r, b, d.pos); err != nil {
			d.fail("", "", "reading %d bytes: %v", n, err)
			return nil
		}
		d.pos += n
		return b
	}
	w := min(uint64(windowSize), d.remaining())
	if cap(d.win) < int(w) {
		d.win = make([]byte, windowSize)
	}
	d.win = d.win[:w]
	if err := readFull(d.r, d.win, d.pos); err != nil {
		d.win = d.win[:0]
		d.fail("", "", "reading %d bytes: %v", w, err)
		return nil
	}
	d.winOff = d.pos
	d.pos += n
	return d.win[:n]
}

func readFull(r io.ReaderAt, b []byte, off uint64) error {
	if off > math.MaxInt64 {
		return fmt.Errorf("offset %d out of range", off)
	}
	n, err := r.ReadAt(b, int64(off))
	if n == len(b) {
		return nil
	}
	if err == nil || err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (d *decoder) u8() uint8 {
	if b := d.next(1); b != nil {
		return b[0]
	}
	return 0
}

func (d *decoder) u16() uint16 {
	if b := d.next(2); b != nil {
		return binary.LittleEndian.Uint16(b)
	}
	return 0
}

func (d *decoder) u32() uint32 {
	if b := d.next(4); b != nil {
		return binary.LittleEndian.Uint32(b)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if b := d.next(8); b != nil {
		return binary.LittleEndian.Uint64(b)
	}
	return 0
}

// str reads a length-prefixed string; what names it in errors.
func (d *decoder) str(key, what string) (string, error) {
	at := d.pos
	n := d.u64()
	if d.err != nil {
		return "", d.err
	}
	if n > d.lim.MaxString {
		return "", d.failAt(at, key, "", "%s of %d bytes exceeds the limit %d", what, n, d.lim.MaxString)
	}
	if n > d.remaining() {
		return "", d.failAt(at, key, "", "%s of %d bytes runs past the end of the file (%d bytes left)", what, n, d.remaining())
	}
	b := d.next(n)
	if d.err != nil {
		return "", d.err
	}
	return string(b), nil
}

func (d *decoder) boolean(key string) bool {
	at := d.pos
	v := d.u8()
	if v > 1 {
		d.failAt(at, key, "", "bool value %d (want 0 or 1)", v)
	}
	return v == 1
}

// value reads a type tag and its value.
func (d *decoder) value(key string) (any, error) {
	at := d.pos
	t := ValueType(d.u32())
	if d.err != nil {
		return nil, d.err
	}
	if t == TypeArray {
		return d.array(key)
	}
	if t != TypeString && t.scalarSize() == 0 {
		return nil, d.failAt(at, key, "", "unknown value type %d", uint32(t))
	}
	v := d.scalar(key, t, "string value")
	return v, d.err
}

// scalar reads a non-array value; what names a string in errors.
func (d *decoder) scalar(key string, t ValueType, what string) any {
	switch t {
	case TypeUint8:
		return d.u8()
	case TypeInt8:
		return int8(d.u8())
	case TypeUint16:
		return d.u16()
	case TypeInt16:
		return int16(d.u16())
	case TypeUint32:
		return d.u32()
	case TypeInt32:
		return int32(d.u32())
	case TypeFloat32:
		return math.Float32frombits(d.u32())
	case TypeBool:
		return d.boolean(key)
	case TypeString:
		s, _ := d.str(key, what)
		return s
	case TypeUint64:
		return d.u64()
	case TypeInt64:
		return int64(d.u64())
	case TypeFloat64:
		return math.Float64frombits(d.u64())
	}
	return nil
}

func (d *decoder) array(key string) (any, error) {
	at := d.pos
	et := ValueType(d.u32())
	n := d.u64()
	if d.err != nil {
		return nil, d.err
	}
	if et == TypeArray {
		return nil, d.failAt(at, key, "", "arrays of arrays are not supported")
	}
	min := uint64(et.scalarSize())
	if et == TypeString {
		min = 8 // the length prefix
	} else if min == 0 {
		return nil, d.failAt(at, key, "", "array of unknown value type %d", uint32(et))
	}
	if n > d.lim.MaxArray {
		return nil, d.failAt(at, key, "", "array of %d elements exceeds the limit %d", n, d.lim.MaxArray)
	}
	if n > d.remaining()/min {
		return nil, d.failAt(at, key, "", "array of %d %s values needs at least %d bytes, %d left", n, et, n*min, d.remaining())
	}
	a := reflect.MakeSlice(sliceTypes[et], int(n), int(n))
	for i := 0; i < int(n) && d.err == nil; i++ {
		a.Index(i).Set(reflect.ValueOf(d.scalar(key, et, "array string")))
	}
	if d.err != nil {
		return nil, d.err
	}
	return a.Interface(), nil
}

// sliceTypes are the Go types of GGUF arrays by element type.
var sliceTypes = map[ValueType]reflect.Type{
	TypeUint8: reflect.TypeOf([]uint8(nil)), TypeInt8: reflect.TypeOf([]int8(nil)),
	TypeUint16: reflect.TypeOf([]uint16(nil)), TypeInt16: reflect.TypeOf([]int16(nil)),
	TypeUint32: reflect.TypeOf([]uint32(nil)), TypeInt32: reflect.TypeOf([]int32(nil)),
	TypeFloat32: reflect.TypeOf([]float32(nil)), TypeBool: reflect.TypeOf([]bool(nil)),
	TypeString: reflect.TypeOf([]string(nil)), TypeUint64: reflect.TypeOf([]uint64(nil)),
	TypeInt64: reflect.TypeOf([]int64(nil)), TypeFloat64: reflect.TypeOf([]float64(nil)),
}

// Get returns the value of a metadata key.
func (f *File) Get(key string) (any, bool) {
	i, ok := f.keys[key]
	if !ok {
		return nil, false
	}
	return f.KVs[i].Value, true
}

// Tensor returns the info of the named tensor.
func (f *File) Tensor(name string) (*TensorInfo, bool) {
	i, ok := f.tensors[name]
	if !ok {
		return nil, false
	}
	return &f.Tensors[i], true
}

// Architecture is general.architecture ("" when absent or not a string).
func (f *File) Architecture() string {
	v, _ := f.Get("general.architecture")
	s, _ := v.(string)
	return s
}

// TensorData returns the raw bytes of the named tensor. With a memory-
// mapped or in-memory source the slice aliases it (read-only).
func (f *File) TensorData(name string) ([]byte, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	off := f.DataOffset + t.Offset
	if b, ok := f.src.(interface{ Bytes() []byte }); ok {
		all := b.Bytes()
		if uint64(len(all)) >= off+t.Size {
			return all[off : off+t.Size : off+t.Size], nil
		}
	}
	if t.Size > math.MaxInt {
		return nil, fmt.Errorf("gguf: tensor %q: %d bytes do not fit in memory", name, t.Size)
	}
	buf := make([]byte, t.Size)
	if err := readFull(f.src, buf, off); err != nil {
		return nil, fmt.Errorf("gguf: tensor %q: reading %d bytes at %d: %w", name, t.Size, off, err)
	}
	return buf, nil
}

// Float32 returns the named tensor as float32 values in ggml order. F32,
// F16, BF16 and the block formats tessera loads (Q8_0, Q4_0, Q4_K, Q5_K,
// Q6_K, MXFP4, dequantized as ggml does) are supported; other types are
// reported by name.
func (f *File) Float32(name string) ([]float32, error) {
	t, ok := f.Tensor(name)
	if !ok {
		return nil, fmt.Errorf("gguf: no tensor %q", name)
	}
	n := t.NumElements()
	if n > math.MaxInt/4 {
		return nil, fmt.Errorf("gguf: tensor %q: %d elements are too many to convert in memory", name, n)
	}
	raw, err := f.TensorData(name)
	if err != nil {
		return nil, err
	}
	out := make([]float32, n)
	switch t.Type {
	case TypeF32:
		for i := range out {
			out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
	case TypeF16, TypeBF16:
		conv := half.F16ToF32
		if t.Type == TypeBF16 {
			conv = half.BF16ToF32
		}
		for i := range out {
			out[i] = conv(binary.LittleEndian.Uint16(raw[2*i:]))
		}
	default:
		if dt, ok := blockedType(t.Type); ok {
			tensor.Dequantize(dt, out, raw)
			break
		}
		return nil, fmt.Errorf("gguf: tensor %q: converting %s to float32 is not implemented", name, t.Type)
	}
	return out, nil
}
