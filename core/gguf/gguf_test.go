package gguf

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"runtime"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// encode writes w to memory.
func encode(t *testing.T, w *Writer) []byte {
	t.Helper()
	var b bytes.Buffer
	n, err := w.WriteTo(&b)
	require.NoError(t, err)
	require.EqualValues(t, b.Len(), n)
	return b.Bytes()
}

func parse(b []byte) (*File, error) { return Parse(bytes.NewReader(b), int64(len(b)), Limits{}) }

func TestRoundTripEveryValueType(t *testing.T) {
	values := []struct {
		key  string
		v    any
		want ValueType
	}{
		{"t.u8", uint8(200), TypeUint8},
		{"t.i8", int8(-100), TypeInt8},
		{"t.u16", uint16(60000), TypeUint16},
		{"t.i16", int16(-30000), TypeInt16},
		{"t.u32", uint32(4000000000), TypeUint32},
		{"t.i32", int32(-2000000000), TypeInt32},
		{"t.f32", float32(-1.5e-7), TypeFloat32},
		{"t.bool_true", true, TypeBool},
		{"t.bool_false", false, TypeBool},
		{"t.str", "kimi-k3 ✓", TypeString},
		{"t.str_empty", "", TypeString},
		{"t.u64", uint64(1) << 60, TypeUint64},
		{"t.i64", int64(-1) << 60, TypeInt64},
		{"t.f64", math.Pi, TypeFloat64},
		{"a.u8", []uint8{0, 1, 255}, TypeArray},
		{"a.i8", []int8{-128, 0, 127}, TypeArray},
		{"a.u16", []uint16{1, 65535}, TypeArray},
		{"a.i16", []int16{-32768, 32767}, TypeArray},
		{"a.u32", []uint32{7, 1 << 31}, TypeArray},
		{"a.i32", []int32{0, 0, 1, -1}, TypeArray},
		{"a.f32", []float32{1, -0.5, float32(math.Inf(1))}, TypeArray},
		{"a.bool", []bool{true, false, true}, TypeArray},
		{"a.str", []string{"Ġ t", "", "<|im_end|>", strings.Repeat("x", 300)}, TypeArray},
		{"a.u64", []uint64{math.MaxUint64}, TypeArray},
		{"a.i64", []int64{math.MinInt64, 5}, TypeArray},
		{"a.f64", []float64{math.SmallestNonzeroFloat64}, TypeArray},
		{"a.empty", []string{}, TypeArray},
	}
	w := NewWriter()
	for _, c := range values {
		typ, _, ok := TypeOf(c.v)
		require.True(t, ok, c.key)
		require.Equal(t, c.want, typ, c.key)
		require.NoError(t, w.Add(c.key, c.v))
	}
	f, err := parse(encode(t, w))
	require.NoError(t, err)
	require.Len(t, f.KVs, len(values))
	for i, c := range values {
		assert.Equal(t, c.key, f.KVs[i].Key, "order kept")
		got, ok := f.Get(c.key)
		require.True(t, ok, c.key)
		assert.Equal(t, c.v, got, c.key)
	}
	assert.EqualValues(t, DefaultAlignment, f.Alignment)
	assert.Empty(t, f.Tensors)
}

func TestWriterRefusals(t *testing.T) {
	w := NewWriter()
	require.NoError(t, w.Add("a", uint32(1)))
	assert.ErrorContains(t, w.Add("a", uint32(2)), "key a set twice")
	assert.ErrorContains(t, w.Add("", uint32(2)), "empty metadata key")
	assert.ErrorContains(t, w.Add("b", 3), "Go type int has no GGUF value type")
	assert.ErrorContains(t, w.Add("c", [][]string{{"x"}}), "no GGUF value type")
	assert.ErrorContains(t, w.Add(KeyAlignment, uint32(48)), "power of two")
	assert.ErrorContains(t, w.SetAlignment(3), "not a power of two")
	assert.ErrorContains(t, w.AddTensor(strings.Repeat("n", 64), TypeF32, []uint64{1}, nil), "length must be 1..63")
	require.NoError(t, w.AddTensor("t", TypeF32, []uint64{1}, nil))
	assert.ErrorContains(t, w.AddTensor("t", TypeF32, []uint64{1}, nil), "tensor t added twice")
	assert.ErrorContains(t, w.AddTensor("q", TypeQ8_0, []uint64{33, 2}, nil), "not a multiple of Q8_0's block size 32")
	assert.ErrorContains(t, w.AddTensor("u", GGMLType(4), []uint64{32}, nil), "unknown ggml type 4")
	assert.ErrorContains(t, w.AddTensor("d", TypeF32, []uint64{1, 1, 1, 1, 1}, nil), "5 dimensions")

	short := NewWriter()
	require.NoError(t, short.AddTensor("x", TypeF32, []uint64{4}, func() ([]byte, error) { return make([]byte, 12), nil }))
	_, err := short.WriteTo(&bytes.Buffer{})
	assert.ErrorContains(t, err, "tensor x: data is 12 bytes, its type F32 and shape [4] need 16")
}

// rawTensor is a tensor given as bytes of any ggml type.
type rawTensor struct {
	name string
	typ  GGMLType
	ne   []uint64
}

func TestRoundTripTensorTypes(t *testing.T) {
	tensors := []rawTensor{
		{"f32", TypeF32, []uint64{3, 5}},
		{"f16", TypeF16, []uint64{7}},
		{"bf16", TypeBF16, []uint64{2, 2, 2}},
		{"q8_0", TypeQ8_0, []uint64{64, 3}},
		{"q4_0", TypeQ4_0, []uint64{32, 2}},
		{"q4_k", TypeQ4_K, []uint64{256, 2}},
		{"q5_k", TypeQ5_K, []uint64{512}},
		{"q6_k", TypeQ6_K, []uint64{256, 1, 3}},
		{"mxfp4", TypeMXFP4, []uint64{64, 2, 2, 1}},
	}
	wantBytes := map[string]uint64{"f32": 60, "f16": 14, "bf16": 16, "q8_0": 3 * 2 * 34, "q4_0": 2 * 18, "q4_k": 2 * 144, "q5_k": 2 * 176, "q6_k": 3 * 210, "mxfp4": 2 * 2 * 2 * 17}
	for _, align := range []uint32{32, 64, 1} {
		w := NewWriter()
		require.NoError(t, w.SetAlignment(align))
		require.NoError(t, w.Add("general.architecture", "test"))
		data := map[string][]byte{}
		for i, tt := range tensors {
			n, err := TensorBytes(tt.typ, tt.ne)
			require.NoError(t, err, tt.name)
			require.Equal(t, wantBytes[tt.name], n, tt.name)
			b := make([]byte, n)
			for j := range b {
				b[j] = byte(i*31 + j)
			}
			data[tt.name] = b
			require.NoError(t, w.AddTensor(tt.name, tt.typ, tt.ne, func() ([]byte, error) { return b, nil }))
		}
		f, err := parse(encode(t, w))
		require.NoError(t, err)
		assert.EqualValues(t, align, f.Alignment)
		_, hasKey := f.Get(KeyAlignment)
		assert.Equal(t, align != DefaultAlignment, hasKey, "general.alignment written only when not 32")
		assert.Zero(t, f.DataOffset%uint64(align))
		require.Len(t, f.Tensors, len(tensors))
		for i, tt := range tensors {
			ti := f.Tensors[i]
			assert.Equal(t, tt.name, ti.Name)
			assert.Equal(t, tt.typ, ti.Type)
			assert.Equal(t, tt.ne, ti.Ne)
			assert.Zero(t, ti.Offset%uint64(align), tt.name)
			got, err := f.TensorData(tt.name)
			require.NoError(t, err)
			assert.Equal(t, data[tt.name], got, tt.name)
		}
	}
}

func TestFloat32Conversions(t *testing.T) {
	x := []float32{1, -2, 0.5, 3.25, -0.125, 65504, 1e-3, 7}
	x32 := make([]float32, 32)
	copy(x32, x)
	w := NewWriter()
	for _, typ := range []GGMLType{TypeF32, TypeF16, TypeBF16} {
		b, err := Encode(typ, x)
		require.NoError(t, err)
		require.NoError(t, w.AddTensor(typ.String(), typ, []uint64{uint64(len(x))}, func() ([]byte, error) { return b, nil }))
	}
	q, err := Encode(TypeQ8_0, x32)
	require.NoError(t, err)
	require.NoError(t, w.AddTensor("q", TypeQ8_0, []uint64{32}, func() ([]byte, error) { return q, nil }))
	require.NoError(t, w.AddTensor("raw", TypeQ4_K, []uint64{256}, func() ([]byte, error) { return make([]byte, 144), nil }))
	require.NoError(t, w.AddTensor("iq", TypeIQ2_XXS, []uint64{256}, func() ([]byte, error) { return make([]byte, 66), nil }))
	f, err := parse(encode(t, w))
	require.NoError(t, err)
	got, err := f.Float32("F32")
	require.NoError(t, err)
	assert.Equal(t, x, got)
	got, err = f.Float32("F16")
	require.NoError(t, err)
	assert.Equal(t, []float32{1, -2, 0.5, 3.25, -0.125, 65504, 0.0010004044, 7}, got)
	got, err = f.Float32("BF16")
	require.NoError(t, err)
	assert.Equal(t, []float32{1, -2, 0.5, 3.25, -0.125, 65536, 0.0009994507, 7}, got)
	got, err = f.Float32("q")
	require.NoError(t, err)
	d := float32(65504) / 127
	for i := range x32 {
		assert.InDelta(t, x32[i], got[i], float64(d)/2+1, "element %d", i)
	}
	raw, err := f.Float32("raw")
	require.NoError(t, err)
	assert.Equal(t, make([]float32, 256), raw) // d = dmin = 0
	_, err = f.Float32("iq")
	assert.ErrorContains(t, err, `tensor "iq": converting IQ2_XXS to float32 is not implemented`)
	_, err = f.Float32("nope")
	assert.ErrorContains(t, err, `no tensor "nope"`)
	_, err = Encode(TypeQ6_K, x32)
	assert.ErrorContains(t, err, "encoding float32 as Q6_K is not implemented")
}

// TestQ8_0HandComputed checks blocks whose quantization is easy by hand.
func TestQ8_0HandComputed(t *testing.T) {
	block := func(f func(j int) float32) []float32 {
		b := make([]float32, 32)
		for j := range b {
			b[j] = f(j)
		}
		return b
	}
	cases := []struct {
		name   string
		x      []float32
		scale  uint16 // fp16 bits of d
		quants []int8
	}{
		{
			// amax 127 → d = 1, id = 1: q = round(x), halves away from zero.
			name:  "d=1",
			x:     block(func(j int) float32 { return []float32{127, -2.5, 2.5, 0.49, -0.5, 0.5, 1.5, -126.6}[j%8] }),
			scale: 0x3c00,
			quants: func() []int8 {
				q := []int8{127, -3, 3, 0, -1, 1, 2, -127}
				out := make([]int8, 32)
				for j := range out {
					out[j] = q[j%8]
				}
				return out
			}(),
		},
		{
			// amax 254 (negative) → d = 2, id = 0.5: 3 → 1.5 → 2, −3 → −2, 1 → 0.5 → 1.
			name:  "d=2",
			x:     block(func(j int) float32 { return []float32{-254, 3, -3, 1, 100, 0}[j%6] }),
			scale: 0x4000,
			quants: func() []int8 {
				q := []int8{-127, 2, -2, 1, 50, 0}
				out := make([]int8, 32)
				for j := range out {
					out[j] = q[j%6]
				}
				return out
			}(),
		},
		{
			// all zero → d = 0, id = 0, q = 0.
			name:   "zero",
			x:      make([]float32, 32),
			scale:  0,
			quants: make([]int8, 32),
		},
		{
			// amax 0.25·127 = 31.75 → d = 0.25 (exact in fp16: 0x3400), id = 4.
			name:  "d=0.25",
			x:     block(func(j int) float32 { return float32(j)*0.25 - 4 + float32(j/31)*(31.75-3.75) }),
			scale: 0x3400,
			quants: func() []int8 {
				out := make([]int8, 32)
				for j := range out {
					out[j] = int8(j - 16)
				}
				out[31] = 127
				return out
			}(),
		},
	}
	var all []float32
	var want []byte
	for _, c := range cases {
		b, err := QuantizeQ8_0(c.x)
		require.NoError(t, err, c.name)
		require.Len(t, b, 34, c.name)
		assert.Equal(t, c.scale, binary.LittleEndian.Uint16(b), "%s: scale", c.name)
		got := make([]int8, 32)
		for j := range got {
			got[j] = int8(b[2+j])
		}
		assert.Equal(t, c.quants, got, c.name)
		all = append(all, c.x...)
		want = append(want, b...)
	}
	b, err := QuantizeQ8_0(all) // blocks are independent
	require.NoError(t, err)
	assert.Equal(t, want, b)
	_, err = QuantizeQ8_0(make([]float32, 33))
	assert.ErrorContains(t, err, "multiple of 32")
}

func TestTypeTable(t *testing.T) {
	// Block sizes and bytes per block of the types the reader must size.
	cases := []struct {
		typ         GGMLType
		name        string
		block, size uint64
	}{
		{TypeF32, "F32", 1, 4}, {TypeF16, "F16", 1, 2}, {TypeBF16, "BF16", 1, 2},
		{TypeQ4_0, "Q4_0", 32, 18}, {TypeQ8_0, "Q8_0", 32, 34},
		{TypeQ4_K, "Q4_K", 256, 144}, {TypeQ5_K, "Q5_K", 256, 176}, {TypeQ6_K, "Q6_K", 256, 210},
		{TypeMXFP4, "MXFP4", 32, 17}, {TypeIQ4_XS, "IQ4_XS", 256, 136}, {TypeTQ1_0, "TQ1_0", 256, 54},
	}
	for _, c := range cases {
		assert.Equal(t, c.name, c.typ.String())
		assert.Equal(t, c.block, c.typ.BlockSize(), c.name)
		assert.Equal(t, c.size, c.typ.TypeSize(), c.name)
		p, err := ParseType(strings.ToLower(c.name))
		require.NoError(t, err)
		assert.Equal(t, c.typ, p)
	}
	assert.False(t, GGMLType(4).Known(), "Q4_2 was removed from ggml")
	assert.Equal(t, "type(31)", GGMLType(31).String())
	_, err := ParseType("q3_x")
	assert.ErrorContains(t, err, `unknown ggml type "q3_x"`)
	_, err = TensorBytes(TypeF32, []uint64{1 << 62, 4})
	assert.ErrorContains(t, err, "more than 2^63 elements")
	_, err = TensorBytes(TypeF64, []uint64{1 << 61})
	assert.ErrorContains(t, err, "larger than 2^63 bytes")
}

// header builds a hand-made GGUF prefix.
type header struct{ bytes.Buffer }

func (h *header) u32(v uint32) *header { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *header) u64(v uint64) *header { binary.Write(&h.Buffer, binary.LittleEndian, v); return h }
func (h *header) str(s string) *header { h.u64(uint64(len(s))); h.WriteString(s); return h }
func (h *header) start(tensors, kvs uint64) *header {
	return h.u32(Magic).u32(3).u64(tensors).u64(kvs)
}
func (h *header) pad(n int) *header { h.Write(make([]byte, n)); return h }

// tensorInfo appends one tensor info.
func (h *header) tensorInfo(name string, typ GGMLType, off uint64, ne ...uint64) *header {
	h.str(name).u32(uint32(len(ne)))
	for _, d := range ne {
		h.u64(d)
	}
	return h.u32(uint32(typ)).u64(off)
}

func TestParseRejectsHostileHeaders(t *testing.T) {
	good := func() *header { return new(header).start(0, 0) }
	cases := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "shorter than a GGUF header"},
		{"magic", new(header).u32(0x46554746).u32(3).u64(0).u64(0).Bytes(), "bad magic"},
		{"version", new(header).u32(Magic).u32(1).u64(0).u64(0).Bytes(), "GGUF version 1 is not supported"},
		{"kv count", new(header).start(0, 1<<40).Bytes(), "metadata entries exceed the limit"},
		{"tensor count", new(header).start(1<<40, 0).Bytes(), "tensors exceed the limit"},
		{"counts vs size", new(header).start(1000, 1000).pad(64).Bytes(), "cannot fit in the"},
		{"key length", new(header).start(0, 1).u64(1 << 40).pad(20).Bytes(), "key of 1099511627776 bytes exceeds the limit"},
		{"key past end", new(header).start(0, 1).u64(1000).pad(20).Bytes(), "key of 1000 bytes runs past the end"},
		{"empty key", new(header).start(0, 1).str("").u32(uint32(TypeUint8)).pad(8).Bytes(), "empty key"},
		{"unknown value type", new(header).start(0, 1).str("k.x").u32(13).pad(8).Bytes(), `key "k.x": unknown value type 13`},
		{"bool", new(header).start(0, 1).str("k.b").u32(uint32(TypeBool)).pad(0).u32(0x02).pad(8).Bytes(), `key "k.b": bool value 2`},
		{"string value", new(header).start(0, 1).str("k.s").u32(uint32(TypeString)).u64(1 << 20).pad(8).Bytes(), `key "k.s": string value of 1048576 bytes runs past the end`},
		{"nested array", new(header).start(0, 1).str("k.a").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(1).pad(8).Bytes(), `key "k.a": arrays of arrays are not supported`},
		{"array type", new(header).start(0, 1).str("k.a").u32(uint32(TypeArray)).u32(99).u64(1).pad(8).Bytes(), `key "k.a": array of unknown value type 99`},
		{"array limit", new(header).start(0, 1).str("k.a").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(1 << 40).pad(8).Bytes(), `key "k.a": array of 1099511627776 elements exceeds the limit`},
		{"array vs size", new(header).start(0, 1).str("tokenizer.ggml.tokens").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1 << 20).pad(64).Bytes(), `key "tokenizer.ggml.tokens": array of 1048576 string values needs at least 8388608 bytes`},
		{"array string past end", new(header).start(0, 1).str("k.a").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("ab").u64(50).pad(8).Bytes(), `key "k.a": array string of 50 bytes runs past the end`},
		{"duplicate key", new(header).start(0, 2).str("k.x").u32(uint32(TypeUint8)).pad(1).str("k.x").u32(uint32(TypeUint8)).pad(1).pad(16).Bytes(), `key "k.x": duplicate key`},
		{"alignment type", new(header).start(0, 1).str(KeyAlignment).u32(uint32(TypeUint64)).u64(32).pad(16).Bytes(), `key "general.alignment": is uint64, want uint32`},
		{"alignment value", new(header).start(0, 1).str(KeyAlignment).u32(uint32(TypeUint32)).u32(48).pad(16).Bytes(), `key "general.alignment": 48 is not a power of two`},
		{"tensor name", new(header).start(1, 0).str(strings.Repeat("n", 64)).pad(40).Bytes(), "name length 64 is not in 1..63"},
		{"dims", new(header).start(1, 0).str("blk.0.x").u32(5).pad(60).Bytes(), `tensor "blk.0.x": 5 dimensions`},
		{"zero dims", new(header).start(1, 0).str("blk.0.x").u32(0).pad(60).Bytes(), `tensor "blk.0.x": 0 dimensions`},
		{"ggml type", new(header).start(1, 0).tensorInfo("w", 31, 0, 32).pad(64).Bytes(), `tensor "w": unknown ggml type 31`},
		{"block size", new(header).start(1, 0).tensorInfo("w", TypeQ4_K, 0, 100, 2).pad(64).Bytes(), `tensor "w": shape [100 2]: ne[0]=100 is not a multiple of Q4_K's block size 256`},
		{"shape product", new(header).start(1, 0).tensorInfo("w", TypeF32, 0, 1<<32, 1<<32).pad(64).Bytes(), `tensor "w": shape [4294967296 4294967296] has more than 2^63 elements`},
		{"offset alignment", new(header).start(1, 0).tensorInfo("w", TypeF32, 4, 4).pad(64).Bytes(), `tensor "w": data offset 4 is not a multiple of the alignment 32`},
		{"data past end", new(header).start(1, 0).tensorInfo("w", TypeF32, 0, 1000).pad(64).Bytes(), `tensor "w": data [0, 4000) of the data section runs past the end`},
		{"offset past end", new(header).start(1, 0).tensorInfo("w", TypeF32, 1<<62, 1).pad(64).Bytes(), `tensor "w": data [4611686018427387904, 4611686018427387908)`},
		{"overlap", new(header).start(2, 0).tensorInfo("a", TypeF32, 0, 16).tensorInfo("b", TypeF32, 32, 16).pad(256).Bytes(), `tensor "b": data at offset 32 overlaps tensor "a" (ends at 64)`},
		{"duplicate tensor", new(header).start(2, 0).tensorInfo("a", TypeF32, 0, 8).tensorInfo("a", TypeF32, 32, 8).pad(256).Bytes(), `tensor "a": duplicate tensor name`},
		{"truncated", good().Bytes()[:20], "shorter than a GGUF header"},
		{"value past end", new(header).start(0, 1).str("k.u64").u32(uint32(TypeUint64)).pad(4).Bytes(), `key "k.u64": unexpected end of file: need 8 bytes, 4 left`},
		{"tensor info past end", new(header).start(1, 0).str("blk.1.w").u32(2).u64(4).pad(10).Bytes(), `tensor "blk.1.w": unexpected end of file`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := parse(c.data)
			require.Error(t, err)
			assert.Contains(t, err.Error(), c.want)
			var fe *FormatError
			assert.ErrorAs(t, err, &fe)
		})
	}
	f, err := parse(good().Bytes())
	require.NoError(t, err, "a header without metadata or tensors is valid")
	assert.Empty(t, f.KVs)
}

// TestParseAllocationIsBounded: a header that claims a huge array in a
// tiny file is rejected before anything of that size is allocated.
func TestParseAllocationIsBounded(t *testing.T) {
	data := new(header).start(0, 1).str("a").u32(uint32(TypeArray)).u32(uint32(TypeUint64)).u64(1 << 23).pad(4096).Bytes()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := parse(data)
	runtime.ReadMemStats(&after)
	require.ErrorContains(t, err, "needs at least 67108864 bytes")
	assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(1<<20), "allocated %d bytes", after.TotalAlloc-before.TotalAlloc)

	lim := Limits{MaxArray: 10, MaxString: 4}
	small := new(header).start(0, 1).str("k.a").u32(uint32(TypeArray)).u32(uint32(TypeUint8)).u64(11).pad(64).Bytes()
	_, err = Parse(bytes.NewReader(small), int64(len(small)), lim)
	assert.ErrorContains(t, err, "array of 11 elements exceeds the limit 10")
	long := new(header).start(0, 1).str("k.abc").u32(uint32(TypeUint8)).pad(64).Bytes()
	_, err = Parse(bytes.NewReader(long), int64(len(long)), lim)
	assert.ErrorContains(t, err, "key of 5 bytes exceeds the limit 4")
}

func TestOpenFile(t *testing.T) {
	w := NewWriter()
	require.NoError(t, w.Add("general.architecture", "kimi-k3"))
	b, err := Encode(TypeF32, []float32{1, 2, 3})
	require.NoError(t, err)
	require.NoError(t, w.AddTensor("x", TypeF32, []uint64{3}, func() ([]byte, error) { return b, nil }))
	path := t.TempDir() + "/m.gguf"
	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	require.NoError(t, writeFile(path, buf.Bytes()))
	f, err := Open(path)
	require.NoError(t, err)
	defer f.Close()
	assert.Equal(t, "kimi-k3", f.Architecture())
	x, err := f.Float32("x")
	require.NoError(t, err)
	assert.Equal(t, []float32{1, 2, 3}, x)

	_, err = Open(t.TempDir())
	assert.ErrorContains(t, err, "is not a regular file")
	_, err = Open(path + ".missing")
	assert.ErrorIs(t, err, os.ErrNotExist)

	require.NoError(t, writeFile(path, buf.Bytes()[:buf.Len()-24])) // 20 bytes of padding + 4 of data
	_, err = Open(path)
	assert.ErrorContains(t, err, `tensor "x": data [0, 12)`)
	assert.ErrorContains(t, err, path)
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o644) }
