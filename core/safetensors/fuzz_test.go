package safetensors

import (
	"bytes"
	"io/fs"
	"testing"
)

// fuzzSeeds returns valid and near-valid safetensors files for FuzzParse.
func fuzzSeeds() [][]byte {
	var seeds [][]byte
	for _, dt := range []DType{F32, F16, BF16} {
		var buf bytes.Buffer
		ts := testTensors(dt)[3:] // small ones
		if err := Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
			panic(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	seeds = append(seeds,
		rawFile(`{}`, nil),
		rawFile(`{"a":{"dtype":"I8","shape":[2,2],"data_offsets":[0,4]},"b":{"dtype":"F4","shape":[2],"data_offsets":[4,5]}}`, make([]byte, 5)),
		rawFile(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, make([]byte, 8)),
		rawFile(`{"a":{"dtype":"F64","shape":[],"data_offsets":[0,8]}, "__metadata__":{"k":"v"}}`, make([]byte, 8)),
		[]byte{2, 0, 0, 0, 0, 0, 0, 0, '{', '}'},
		[]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, '{'},
	)
	return seeds
}

// FuzzParse checks that Parse never panics on arbitrary bytes and that
// every tensor of an accepted file lies inside the file and is readable.
func FuzzParse(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		file, err := Parse(BytesSource(data), "fuzz")
		if err != nil {
			if file != nil {
				t.Fatal("Parse returned both a file and an error")
			}
			return
		}
		for name, tt := range file.Tensors {
			if tt.Offset < file.DataOff || tt.Size < 0 || tt.Offset+tt.Size > int64(len(data)) {
				t.Fatalf("tensor %q at [%d, %d) outside data region [%d, %d)", name, tt.Offset, tt.Offset+tt.Size, file.DataOff, len(data))
			}
		}
		c, err := Open(MemOpener(map[string][]byte{SingleFileName: data}))
		if err != nil {
			t.Fatalf("Parse accepted the file but Open failed: %v", err)
		}
		for _, name := range c.Names() {
			tt, _ := c.Tensor(name)
			b, err := c.Bytes(name)
			if err != nil || int64(len(b)) != tt.Size {
				t.Fatalf("Bytes(%q): %d bytes, %v", name, len(b), err)
			}
			if tt.DType.ConvertibleToFloat32() && tt.NumElements() <= 1<<20 {
				v, err := c.Float32(name)
				if err != nil || int64(len(v)) != tt.NumElements() {
					t.Fatalf("Float32(%q): %d values, %v", name, len(v), err)
				}
			}
		}
	})
}

// FuzzIndex checks that ParseIndex never panics and that an accepted index
// has a non-empty weight_map of valid relative shard names; it then opens a
// checkpoint with that index over empty shards, which must fail cleanly.
func FuzzIndex(f *testing.F) {
	f.Add([]byte(`{"metadata":{"total_size":8},"weight_map":{"a":"model-00001-of-00002.safetensors","b":"model-00002-of-00002.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"x.safetensors"}}`))
	f.Add([]byte(`{"weight_map":{"a":"../x"}}`))
	f.Add([]byte(`{"weight_map":{}}`))
	f.Add([]byte(`{"weight_map":{"a":1},"metadata":[]}`))
	f.Add([]byte(`{"weight_map":{"a":"s","a":"t"}}`))
	f.Add([]byte(`[]`))
	f.Fuzz(func(t *testing.T, data []byte) {
		ix, err := ParseIndex(data, IndexFileName)
		if err != nil {
			return
		}
		if len(ix.WeightMap) == 0 {
			t.Fatal("accepted an empty weight_map")
		}
		files := map[string][]byte{IndexFileName: data}
		for n, s := range ix.WeightMap {
			if n == "" || !fs.ValidPath(s) {
				t.Fatalf("accepted tensor %q in shard %q", n, s)
			}
			files[s] = rawFile(`{}`, nil)
		}
		if _, err := Open(MemOpener(files)); err == nil {
			t.Fatal("Open succeeded with shards that lack the indexed tensors")
		}
	})
}
