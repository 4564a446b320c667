package gguf

import (
	"bytes"
	"testing"
)

// FuzzParse feeds arbitrary bytes to Parse. It must never panic or
// over-allocate; whatever it accepts must survive a write/read round trip
// with the same metadata, tensor infos and tensor data.
func FuzzParse(f *testing.F) {
	f.Add([]byte("GGUF"))
	for _, seed := range fuzzSeeds() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		lim := Limits{MaxKVs: 64, MaxTensors: 64, MaxString: 1 << 12, MaxArray: 1 << 12}
		g, err := Parse(bytes.NewReader(data), int64(len(data)), lim)
		if err != nil {
			return
		}
		w := NewWriter()
		for _, kv := range g.KVs {
			if err := w.Add(kv.Key, kv.Value); err != nil {
				t.Fatalf("re-adding key %q: %v", kv.Key, err)
			}
		}
		for _, ti := range g.Tensors {
			b, err := g.TensorData(ti.Name)
			if err != nil {
				t.Fatalf("tensor %q of a parsed file: %v", ti.Name, err)
			}
			if err := w.AddTensor(ti.Name, ti.Type, ti.Ne, func() ([]byte, error) { return b, nil }); err != nil {
				t.Fatalf("re-adding tensor %q: %v", ti.Name, err)
			}
		}
		var buf bytes.Buffer
		if _, err := w.WriteTo(&buf); err != nil {
			t.Fatalf("writing back: %v", err)
		}
		h, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()), lim)
		if err != nil {
			t.Fatalf("re-parsing what was written: %v", err)
		}
		if len(h.KVs) != len(g.KVs) || len(h.Tensors) != len(g.Tensors) || h.Alignment != g.Alignment {
			t.Fatalf("round trip changed counts or alignment")
		}
		for i, kv := range g.KVs {
			if h.KVs[i].Key != kv.Key || !sameValue(h.KVs[i].Value, kv.Value) {
				t.Fatalf("key %q changed in the round trip", kv.Key)
			}
		}
		for i, ti := range g.Tensors {
			u := h.Tensors[i]
			if u.Name != ti.Name || u.Type != ti.Type || u.Size != ti.Size || len(u.Ne) != len(ti.Ne) {
				t.Fatalf("tensor %q changed in the round trip", ti.Name)
			}
			a, _ := g.TensorData(ti.Name)
			b, err := h.TensorData(ti.Name)
			if err != nil || !bytes.Equal(a, b) {
				t.Fatalf("tensor %q data changed in the round trip (%v)", ti.Name, err)
			}
		}
	})
}

// sameValue compares two metadata values by their encoding (so NaN equals
// NaN with the same bits).
func sameValue(a, b any) bool {
	var x, y bytes.Buffer
	(&encoder{w: &x}).value(a)
	(&encoder{w: &y}).value(b)
	return bytes.Equal(x.Bytes(), y.Bytes())
}

// fuzzSeeds are small valid files: every value type, each tensor type,
// a non-default alignment.
func fuzzSeeds() [][]byte {
	var out [][]byte
	add := func(w *Writer) {
		var b bytes.Buffer
		if _, err := w.WriteTo(&b); err != nil {
			panic(err)
		}
		out = append(out, b.Bytes())
	}
	w := NewWriter()
	for i, v := range []any{uint8(1), int8(-1), uint16(2), int16(-2), uint32(3), int32(-3), float32(0.5), true, "s", uint64(4), int64(-4), 0.25,
		[]uint8{1}, []int8{-1}, []uint16{2}, []int16{-2}, []uint32{3}, []int32{-3}, []float32{0.5}, []bool{false}, []string{"a", ""}, []uint64{4}, []int64{-4}, []float64{0.25}} {
		if err := w.Add(string(rune('a'+i)), v); err != nil {
			panic(err)
		}
	}
	add(w)
	w = NewWriter()
	_ = w.SetAlignment(64)
	_ = w.Add("general.architecture", "kimi-k3")
	for _, t := range []struct {
		typ GGMLType
		ne  []uint64
	}{{TypeF32, []uint64{2, 2}}, {TypeF16, []uint64{3}}, {TypeBF16, []uint64{1, 1, 1, 2}}, {TypeQ8_0, []uint64{32}}, {TypeQ4_0, []uint64{32}}, {TypeQ6_K, []uint64{256}}, {TypeMXFP4, []uint64{32}}} {
		n, _ := TensorBytes(t.typ, t.ne)
		b := bytes.Repeat([]byte{0x3c}, int(n))
		if err := w.AddTensor(t.typ.String(), t.typ, t.ne, func() ([]byte, error) { return b, nil }); err != nil {
			panic(err)
		}
	}
	add(w)
	return out
}
