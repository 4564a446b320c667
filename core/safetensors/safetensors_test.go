package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/half"
)

// rawFile builds a safetensors file from a literal header and data bytes.
func rawFile(header string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(header)))
	b = append(b, header...)
	return append(b, data...)
}

func testTensors(dt DType) []WriteTensor {
	r := rand.New(rand.NewPCG(7, uint64(len(dt))))
	mk := func(name string, shape ...int) WriteTensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		data := make([]float32, n)
		for i := range data {
			data[i] = float32(r.NormFloat64() * 3)
		}
		return WriteTensor{Name: name, DType: dt, Shape: shape, Data: data}
	}
	ts := []WriteTensor{
		mk("model.layers.0.self_attn.q_proj.weight", 16, 8),
		mk("model.embed_tokens.weight", 32, 8),
		mk("model.layers.1.mlp.gate_proj.weight", 24, 8),
		mk("model.norm.weight", 8),
		mk("scalar"),
		mk("empty", 0, 3),
		mk("odd", 3, 5), // odd element count, so later tensors are not 4-byte aligned for F16
	}
	ts[3].Data[0] = float32(math.Inf(1))
	ts[3].Data[1] = -0.0
	ts[3].Data[2] = 1e-6  // subnormal in fp16
	ts[3].Data[3] = 70000 // overflows fp16
	return ts
}

func rounded(dt DType, v float32) float32 {
	switch dt {
	case F16:
		return half.F16ToF32(half.F32ToF16(v))
	case BF16:
		return half.BF16ToF32(half.F32ToBF16(v))
	}
	return v
}

func checkCheckpoint(t *testing.T, c *Checkpoint, want []WriteTensor) {
	t.Helper()
	if got := len(c.Names()); got != len(want) {
		t.Fatalf("Names() has %d tensors, want %d: %v", got, len(want), c.Names())
	}
	for i := 1; i < len(c.Names()); i++ {
		if c.Names()[i-1] >= c.Names()[i] {
			t.Fatalf("Names() not sorted: %v", c.Names())
		}
	}
	for _, w := range want {
		tt, ok := c.Tensor(w.Name)
		if !ok {
			t.Fatalf("tensor %q missing", w.Name)
		}
		if tt.DType != w.DType || fmt.Sprint(tt.Shape) != fmt.Sprint(w.Shape) {
			t.Errorf("tensor %q: dtype %s shape %v, want %s %v", w.Name, tt.DType, tt.Shape, w.DType, w.Shape)
		}
		got, err := c.Float32(w.Name)
		if err != nil {
			t.Fatalf("Float32(%q): %v", w.Name, err)
		}
		if len(got) != len(w.Data) {
			t.Fatalf("Float32(%q): %d values, want %d", w.Name, len(got), len(w.Data))
		}
		for i, v := range w.Data {
			if e := rounded(w.DType, v); math.Float32bits(got[i]) != math.Float32bits(e) {
				t.Fatalf("tensor %q [%d] = %v, want %v (from %v)", w.Name, i, got[i], e, v)
			}
		}
		b, err := c.Bytes(w.Name)
		if err != nil {
			t.Fatalf("Bytes(%q): %v", w.Name, err)
		}
		if int64(len(b)) != tt.Size || int64(len(b)) != int64(len(w.Data)*w.DType.ElemSize()) {
			t.Errorf("Bytes(%q) has %d bytes, tensor size %d", w.Name, len(b), tt.Size)
		}
	}
}

func TestRoundTrip(t *testing.T) {
	for _, dt := range []DType{F32, F16, BF16} {
		ts := testTensors(dt)
		meta := map[string]string{"format": "pt", "tessera": "test"}

		t.Run(string(dt)+"/memory", func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, ts, meta); err != nil {
				t.Fatal(err)
			}
			hlen := binary.LittleEndian.Uint64(buf.Bytes())
			if (8+hlen)%8 != 0 {
				t.Errorf("data region starts at %d, not 8-byte aligned", 8+hlen)
			}
			c, err := Open(MemOpener(map[string][]byte{SingleFileName: buf.Bytes()}))
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			checkCheckpoint(t, c, ts)
			if c.Metadata["tessera"] != "test" || c.Index != nil {
				t.Errorf("metadata %v, index %v", c.Metadata, c.Index)
			}
			// Zero-copy: the slice aliases the source buffer.
			b, _ := c.Bytes("model.norm.weight")
			tt, _ := c.Tensor("model.norm.weight")
			if &b[0] != &buf.Bytes()[tt.Offset] {
				t.Error("Bytes of an in-memory source is a copy")
			}
		})

		for _, mode := range []struct {
			name     string
			maxShard int64
			shards   int
		}{{"single", 0, 1}, {"single-fits", 1 << 20, 1}, {"sharded", 600, 0}} {
			t.Run(string(dt)+"/dir-"+mode.name, func(t *testing.T) {
				dir := t.TempDir()
				// A stale index must not shadow a freshly written single file.
				if mode.shards == 1 {
					os.WriteFile(filepath.Join(dir, IndexFileName), []byte("{stale"), 0o644)
				}
				if err := WriteDir(dir, ts, meta, mode.maxShard); err != nil {
					t.Fatal(err)
				}
				c, err := OpenDir(dir)
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				checkCheckpoint(t, c, ts)
				if mode.shards == 1 {
					if len(c.Files()) != 1 || c.Index != nil {
						t.Errorf("got %d files, index %v; want single file", len(c.Files()), c.Index)
					}
				} else {
					if len(c.Files()) < 2 || c.Index == nil {
						t.Fatalf("got %d files, want several shards", len(c.Files()))
					}
					var total int64
					for _, f := range c.Files() {
						var data int64
						nonEmpty := 0
						for _, tt := range f.Tensors {
							data += tt.Size
							if tt.Size > 0 {
								nonEmpty++
							}
						}
						if data > mode.maxShard && nonEmpty > 1 {
							t.Errorf("shard %s holds %d bytes > %d", f.Name, data, mode.maxShard)
						}
						total += data
					}
					if c.Metadata["total_size"] != fmt.Sprint(total) || c.Metadata["tessera"] != "test" {
						t.Errorf("metadata %v, total %d", c.Metadata, total)
					}
					if want := ShardName(1, len(c.Files())); c.Files()[0].Name != want {
						t.Errorf("first shard %s, want %s", c.Files()[0].Name, want)
					}
				}
				if err := c.Close(); err != nil {
					t.Errorf("Close: %v", err)
				}
				if _, err := c.Float32("model.norm.weight"); err == nil || !strings.Contains(err.Error(), "closed") {
					t.Errorf("read after Close: %v", err)
				}
			})
		}
	}
}

func TestWriteDeterministic(t *testing.T) {
	ts := testTensors(F16)
	var a, b bytes.Buffer
	if err := Write(&a, ts, map[string]string{"x": "1", "a": "2"}); err != nil {
		t.Fatal(err)
	}
	rev := make([]WriteTensor, len(ts))
	for i := range ts {
		rev[len(ts)-1-i] = ts[i]
	}
	if err := Write(&b, rev, map[string]string{"a": "2", "x": "1"}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Error("Write output depends on input order")
	}
}

// readerOnly hides Bytes() so the copying, chunked read path is used.
type readerOnly struct{ Source }

func TestReadAtSource(t *testing.T) {
	n := readChunk/4*2 + 123 // spans three chunks
	data := make([]float32, n)
	for i := range data {
		data[i] = float32(i)
	}
	ts := []WriteTensor{{Name: "big", DType: F32, Shape: []int{n}, Data: data}, {Name: "h", DType: BF16, Shape: []int{3}, Data: []float32{1, 2, 3}}}
	var buf bytes.Buffer
	if err := Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	c, err := Open(func(name string) (Source, error) {
		if name != SingleFileName {
			return nil, fs.ErrNotExist
		}
		return readerOnly{BytesSource(buf.Bytes())}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkCheckpoint(t, c, ts)
	b, _ := c.Bytes("h")
	tt, _ := c.Tensor("h")
	if &b[0] == &buf.Bytes()[tt.Offset] {
		t.Error("Bytes of a ReaderAt-only source aliases memory")
	}
	if err := c.ReadFloat32("big", make([]float32, n-1)); err == nil || !strings.Contains(err.Error(), `"big"`) || !strings.Contains(err.Error(), "destination has") {
		t.Errorf("short destination: %v", err)
	}
}

func TestDTypes(t *testing.T) {
	tests := []struct {
		d     DType
		bits  int
		size  int
		float bool
	}{
		{F32, 32, 4, true}, {F16, 16, 2, true}, {BF16, 16, 2, true}, {F64, 64, 8, true},
		{I64, 64, 8, false}, {I32, 32, 4, false}, {I16, 16, 2, false}, {I8, 8, 1, false},
		{U8, 8, 1, false}, {BOOL, 8, 1, false}, {F8E4M3, 8, 1, false}, {F8E5M2, 8, 1, false},
		{F4, 4, 0, false}, {F6E2M3, 6, 0, false},
	}
	for _, tt := range tests {
		d, err := ParseDType(string(tt.d))
		if err != nil || d != tt.d || d.Bits() != tt.bits || d.ElemSize() != tt.size || d.ConvertibleToFloat32() != tt.float {
			t.Errorf("%s: parse %v %v bits %d size %d float %v", tt.d, d, err, d.Bits(), d.ElemSize(), d.ConvertibleToFloat32())
		}
	}
	if _, err := ParseDType("F12"); err == nil {
		t.Error("ParseDType(F12) succeeded")
	}
}

func TestOtherDTypes(t *testing.T) {
	// An I32 tensor parses and its bytes are readable, but not as float32.
	// An F64 tensor converts. A packed F4 tensor of 4 elements is 2 bytes.
	data := make([]byte, 0, 8+16+2)
	data = binary.LittleEndian.AppendUint32(data, 7)
	data = binary.LittleEndian.AppendUint32(data, 9)
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(1.5))
	data = binary.LittleEndian.AppendUint64(data, math.Float64bits(-1e300))
	data = append(data, 0x12, 0x34)
	hdr := `{"ids":{"dtype":"I32","shape":[2],"data_offsets":[0,8]},"d":{"dtype":"F64","shape":[2],"data_offsets":[8,24]},"q":{"dtype":"F4","shape":[4],"data_offsets":[24,26]}}`
	c, err := Open(MemOpener(map[string][]byte{SingleFileName: rawFile(hdr, data)}))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Float32("ids"); err == nil || !strings.Contains(err.Error(), `tensor "ids"`) || !strings.Contains(err.Error(), "I32") {
		t.Errorf("Float32 of I32: %v", err)
	}
	if b, err := c.Bytes("ids"); err != nil || binary.LittleEndian.Uint32(b[4:]) != 9 {
		t.Errorf("Bytes(ids) = %v, %v", b, err)
	}
	if v, err := c.Float32("d"); err != nil || v[0] != 1.5 || !math.IsInf(float64(v[1]), -1) {
		t.Errorf("Float32(d) = %v, %v", v, err)
	}
	if _, err := c.Float32("nope"); err == nil || !strings.Contains(err.Error(), `"nope"`) {
		t.Errorf("Float32(nope): %v", err)
	}
}

func TestParseErrors(t *testing.T) {
	f32 := func(n int) []byte { return make([]byte, 4*n) }
	tests := []struct {
		name string
		file []byte
		want []string
	}{
		{"truncated", []byte{1, 2, 3}, []string{"3 bytes", "shorter than the 8-byte"}},
		{"empty", nil, []string{"0 bytes", "shorter than"}},
		{"header beyond file", append(binary.LittleEndian.AppendUint64(nil, 1000), "{}"...), []string{"header length 1000 exceeds the 2 bytes"}},
		{"header beyond cap", append(binary.LittleEndian.AppendUint64(nil, MaxHeaderSize+1), make([]byte, MaxHeaderSize+1)...), []string{"exceeds the 104857600-byte limit"}},
		{"invalid JSON", rawFile(`{"a": {"dtype": "F32",, }}`, nil), []string{"invalid JSON header", "byte offset 30"}},
		{"not an object", rawFile(`[1, 2]`, nil), []string{"invalid JSON header", "expected a JSON object"}},
		{"trailing garbage", rawFile(`{}  x`, nil), []string{"invalid JSON header", "after top-level value", "byte offset 12"}},
		{"entry not object", rawFile(`{"w": 5}`, nil), []string{`tensor "w"`, "must be a JSON object"}},
		{"missing dtype", rawFile(`{"w": {"shape": [1], "data_offsets": [0, 4]}}`, f32(1)), []string{`tensor "w"`, `missing "dtype"`, "byte offset 14"}},
		{"missing shape", rawFile(`{"w": {"dtype": "F32", "data_offsets": [0, 4]}}`, f32(1)), []string{`tensor "w"`, `missing "shape"`}},
		{"missing offsets", rawFile(`{"w": {"dtype": "F32", "shape": [1]}}`, f32(1)), []string{`tensor "w"`, `missing "data_offsets"`}},
		{"unknown dtype", rawFile(`{"w": {"dtype": "F12", "shape": [1], "data_offsets": [0, 4]}}`, f32(1)), []string{`tensor "w"`, `unknown dtype "F12"`}},
		{"negative dim", rawFile(`{"w": {"dtype": "F32", "shape": [2, -1], "data_offsets": [0, 4]}}`, f32(1)), []string{`tensor "w"`, "shape[1] is negative"}},
		{"fractional dim", rawFile(`{"w": {"dtype": "F32", "shape": [1.5], "data_offsets": [0, 4]}}`, f32(1)), []string{`tensor "w"`, "shape[0]", "not an integer"}},
		{"dim overflow", rawFile(`{"w": {"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 4]}}`, f32(1)), []string{`tensor "w"`, "overflows"}},
		{"three offsets", rawFile(`{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4, 8]}}`, f32(2)), []string{`tensor "w"`, "must have 2 elements"}},
		{"begin after end", rawFile(`{"w": {"dtype": "F32", "shape": [1], "data_offsets": [8, 4]}}`, f32(2)), []string{`tensor "w"`, "begin 8 > end 4"}},
		{"negative offset", rawFile(`{"w": {"dtype": "F32", "shape": [1], "data_offsets": [-4, 0]}}`, f32(2)), []string{`tensor "w"`, "negative"}},
		{"offsets out of range", rawFile(`{"w": {"dtype": "F32", "shape": [4], "data_offsets": [0, 16]}}`, f32(2)), []string{`tensor "w"`, "end 16 is beyond the 8-byte data region"}},
		{"huge offset", rawFile(`{"w": {"dtype": "F32", "shape": [1], "data_offsets": [0, 99999999999999999999]}}`, f32(2)), []string{`tensor "w"`, "data_offsets[1]", "not an integer"}},
		{"wrong byte size", rawFile(`{"w": {"dtype": "F16", "shape": [3], "data_offsets": [0, 8]}}`, f32(2)), []string{`tensor "w"`, "byte size 8", "F16", "[3]", "need 6 bytes"}},
		{"sub-byte fraction", rawFile(`{"w": {"dtype": "F4", "shape": [3], "data_offsets": [0, 2]}}`, f32(2)), []string{`tensor "w"`, "not a whole number of bytes"}},
		{"overlap", rawFile(`{"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [2], "data_offsets": [4, 12]}}`, f32(3)), []string{`tensor "b"`, `overlaps tensor "a"`}},
		{"duplicate name", rawFile(`{"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}`, f32(2)), []string{`tensor "a"`, "duplicate tensor name"}},
		{"empty name", rawFile(`{"": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}`, f32(1)), []string{"empty tensor name"}},
		{"bad metadata", rawFile(`{"__metadata__": {"k": 1}}`, nil), []string{"__metadata__ must be an object of string values"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(BytesSource(tt.file), "bad.safetensors")
			if err == nil {
				t.Fatal("Parse succeeded")
			}
			var fe *FormatError
			if !errors.As(err, &fe) {
				t.Errorf("error %T is not a *FormatError", err)
			}
			msg := err.Error()
			if !strings.Contains(msg, "bad.safetensors") {
				t.Errorf("error %q does not name the file", msg)
			}
			for _, w := range tt.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q does not contain %q", msg, w)
				}
			}
		})
	}
}

func TestParseAccepts(t *testing.T) {
	// Zero-sized tensors at any offset, null metadata, whitespace padding,
	// holes between tensors.
	hdr := `{"__metadata__": null, "z": {"dtype": "F32", "shape": [0, 5], "data_offsets": [4, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "b": {"dtype": "BF16", "shape": [], "data_offsets": [6, 8]}}    `
	f, err := Parse(BytesSource(rawFile(hdr, make([]byte, 8))), "ok")
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3 || f.Tensors["b"].NumElements() != 1 || f.Tensors["z"].NumElements() != 0 {
		t.Errorf("tensors %v", f.Tensors)
	}
}

// shardedFiles writes a valid two-shard checkpoint and returns its files.
func shardedFiles(t *testing.T) map[string][]byte {
	t.Helper()
	dir := t.TempDir()
	ts := testTensors(F32)
	if err := WriteDir(dir, ts, nil, 400); err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		files[e.Name()] = b
	}
	if _, ok := files[ShardName(2, len(files)-1)]; !ok {
		t.Fatalf("expected several shards, got %v", len(files))
	}
	return files
}

func TestOpenErrors(t *testing.T) {
	base := shardedFiles(t)
	ix, err := ParseIndex(base[IndexFileName], IndexFileName)
	if err != nil {
		t.Fatal(err)
	}
	// shard2 is the shard holding the most tensors (so that it is still
	// opened when one of them, in2, is reassigned); shard1 is another one
	// and in1 one of its tensors.
	count := map[string]int{}
	for _, s := range ix.WeightMap {
		count[s]++
	}
	var shard1, shard2 string
	for _, s := range ix.Shards() {
		if shard2 == "" || count[s] > count[shard2] {
			shard2 = s
		}
	}
	for _, s := range ix.Shards() {
		if s != shard2 {
			shard1 = s
			break
		}
	}
	var in1, in2 string
	for n, s := range ix.WeightMap {
		if s == shard1 && n > in1 {
			in1 = n
		}
		if s == shard2 && n > in2 {
			in2 = n
		}
	}
	if count[shard2] < 2 {
		t.Fatalf("no shard holds several tensors: %v", ix.WeightMap)
	}
	index := func(edit func(wm map[string]string)) []byte {
		wm := map[string]string{}
		for k, v := range ix.WeightMap {
			wm[k] = v
		}
		edit(wm)
		var b bytes.Buffer
		b.WriteString(`{"metadata": {"total_size": 1}, "weight_map": {`)
		first := true
		for k, v := range wm {
			if !first {
				b.WriteString(",")
			}
			first = false
			fmt.Fprintf(&b, "%q: %q", k, v)
		}
		b.WriteString("}}")
		return b.Bytes()
	}
	// A shard that holds one tensor also in shard1.
	dupShard := func() []byte {
		var buf bytes.Buffer
		Write(&buf, []WriteTensor{{Name: in1, DType: F32, Shape: []int{1}, Data: []float32{1}}}, nil)
		return buf.Bytes()
	}

	tests := []struct {
		name string
		edit func(files map[string][]byte)
		want []string
	}{
		{"no checkpoint", func(f map[string][]byte) { clear(f) }, []string{"neither", IndexFileName, SingleFileName}},
		{"index invalid JSON", func(f map[string][]byte) { f[IndexFileName] = []byte(`{"weight_map": {"a": }`) }, []string{IndexFileName, "invalid JSON", "byte offset 21"}},
		{"index without weight_map", func(f map[string][]byte) { f[IndexFileName] = []byte(`{"metadata": {}}`) }, []string{`no "weight_map"`}},
		{"index bad shard path", func(f map[string][]byte) { f[IndexFileName] = []byte(`{"weight_map": {"a": "../x.safetensors"}}`) }, []string{`tensor "a"`, `"../x.safetensors" is not a relative path`}},
		{"missing shard file", func(f map[string][]byte) { delete(f, shard2) }, []string{"opening shard " + shard2, "not exist"}},
		{"missing tensor in shard", func(f map[string][]byte) {
			f[IndexFileName] = index(func(wm map[string]string) { wm["ghost.weight"] = shard2 })
		}, []string{`tensor "ghost.weight"`, shard2, "missing from its shard"}},
		{"tensor not in weight_map", func(f map[string][]byte) {
			f[IndexFileName] = index(func(wm map[string]string) { delete(wm, in2) })
		}, []string{shard2, fmt.Sprintf("tensor %q", in2), "not listed in"}},
		{"tensor in wrong shard", func(f map[string][]byte) {
			f[IndexFileName] = index(func(wm map[string]string) { wm[in2] = shard1 })
		}, []string{shard2, fmt.Sprintf("tensor %q", in2), "assigns it to " + shard1}},
		{"duplicate tensor across shards", func(f map[string][]byte) {
			f["extra.safetensors"] = dupShard()
			f[IndexFileName] = index(func(wm map[string]string) { wm["placeholder"] = "extra.safetensors" })
		}, []string{fmt.Sprintf("tensor %q", in1), "duplicate tensor", "also present in shard", shard1, "extra.safetensors"}},
		{"malformed shard", func(f map[string][]byte) { f[shard2] = f[shard2][:len(f[shard2])-1] }, []string{shard2, "beyond the"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			files := map[string][]byte{}
			for k, v := range base {
				files[k] = v
			}
			tt.edit(files)
			_, err := Open(MemOpener(files))
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	// The unedited files open.
	c, err := Open(MemOpener(base))
	if err != nil {
		t.Fatal(err)
	}
	checkCheckpoint(t, c, testTensors(F32))
}

func TestWriteErrors(t *testing.T) {
	tests := []struct {
		name string
		ts   []WriteTensor
		want string
	}{
		{"data length", []WriteTensor{{Name: "w", DType: F32, Shape: []int{2, 3}, Data: make([]float32, 5)}}, `tensor "w": 5 values for shape [2 3], which needs 6`},
		{"dtype", []WriteTensor{{Name: "w", DType: I32, Shape: []int{1}, Data: make([]float32, 1)}}, `tensor "w": dtype "I32" cannot be written`},
		{"negative dim", []WriteTensor{{Name: "w", DType: F16, Shape: []int{-1}}}, `tensor "w": shape[0] is negative`},
		{"duplicate", []WriteTensor{{Name: "w", DType: F32, Shape: []int{0}}, {Name: "w", DType: F32, Shape: []int{0}}}, `duplicate tensor name "w"`},
		{"empty name", []WriteTensor{{DType: F32, Data: []float32{1}}}, "empty name"},
		{"reserved name", []WriteTensor{{Name: "__metadata__", DType: F32, Data: []float32{1}}}, "reserved"},
		{"invalid utf8", []WriteTensor{{Name: "w\xff", DType: F32, Data: []float32{1}}}, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Write(&bytes.Buffer{}, tt.ts, nil)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Write error %v, want %q", err, tt.want)
			}
			if err := WriteDir(t.TempDir(), tt.ts, nil, 0); err == nil {
				t.Error("WriteDir succeeded")
			}
		})
	}
}

func TestDirOpenerRejectsEscapes(t *testing.T) {
	if _, err := DirOpener(t.TempDir())("../etc/passwd"); err == nil || !strings.Contains(err.Error(), "invalid file name") {
		t.Errorf("escape: %v", err)
	}
	if _, err := OpenDir(t.TempDir()); err == nil || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("empty dir: %v", err)
	}
}

func BenchmarkReadAllFloat32(b *testing.B) {
	for _, dt := range []DType{F32, F16, BF16} {
		b.Run(string(dt), func(b *testing.B) {
			dir := b.TempDir()
			var ts []WriteTensor
			for i := range 8 {
				ts = append(ts, WriteTensor{Name: fmt.Sprintf("layer.%d.weight", i), DType: dt, Shape: []int{256, 512}, Data: make([]float32, 256*512)})
			}
			if err := WriteDir(dir, ts, nil, 0); err != nil {
				b.Fatal(err)
			}
			c, err := OpenDir(dir)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			var total int64
			bufs := map[string][]float32{}
			for _, n := range c.Names() {
				tt, _ := c.Tensor(n)
				total += tt.Size
				bufs[n] = make([]float32, tt.NumElements())
			}
			b.SetBytes(total)
			b.ResetTimer()
			for b.Loop() {
				for _, n := range c.Names() {
					if err := c.ReadFloat32(n, bufs[n]); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
