package bind

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

type norm struct {
	W []float32 `ckpt:"weight" shape:"n"`
	B []float32 `ckpt:"bias" shape:"n" if:"!rms"`
}

type block struct {
	Norm norm        `ckpt:"norm" with:"n=D"`
	W    *tensor.Mat `ckpt:"w.weight" shape:"D,2,2"`
}

type model struct {
	Note   string
	Blocks []block `ckpt:"blocks" n:"layers"`
	Post   *norm   `ckpt:"post" if:"post" with:"n=3,rms=true"`
	Extra  []float32
}

func checkpoint(t *testing.T, ts ...safetensors.WriteTensor) *safetensors.Checkpoint {
	var b bytes.Buffer
	require.NoError(t, safetensors.Write(&b, ts, nil))
	ck, err := safetensors.Open(safetensors.MemOpener(map[string][]byte{safetensors.SingleFileName: b.Bytes()}))
	require.NoError(t, err)
	return ck
}

// The tags name each tensor once: the spec (nil checkpoint) and the
// binding read the same names, shapes and conditions.
func TestStruct(t *testing.T) {
	dims := map[string]int{"D": 2, "layers": 2}
	for _, tc := range []struct {
		name  string
		conds map[string]bool
		want  []TensorSpec
	}{
		{"layernorm, no post", map[string]bool{}, []TensorSpec{
			{Name: "blocks.0.norm.weight", Shape: []int{2}}, {Name: "blocks.0.norm.bias", Shape: []int{2}}, {Name: "blocks.0.w.weight", Shape: []int{2, 2, 2}},
			{Name: "blocks.1.norm.weight", Shape: []int{2}}, {Name: "blocks.1.norm.bias", Shape: []int{2}}, {Name: "blocks.1.w.weight", Shape: []int{2, 2, 2}}}},
		{"rmsnorm, post", map[string]bool{"rms": true, "post": true}, []TensorSpec{
			{Name: "blocks.0.norm.weight", Shape: []int{2}}, {Name: "blocks.0.w.weight", Shape: []int{2, 2, 2}},
			{Name: "blocks.1.norm.weight", Shape: []int{2}}, {Name: "blocks.1.w.weight", Shape: []int{2, 2, 2}},
			{Name: "post.weight", Shape: []int{3}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			spec := New(nil)
			spec.Struct("", &model{}, dims, tc.conds)
			require.NoError(t, spec.Err)
			require.Equal(t, tc.want, spec.Spec)

			var ts []safetensors.WriteTensor
			for i, s := range spec.Spec {
				n := 1
				for _, d := range s.Shape {
					n *= d
				}
				data := make([]float32, n)
				for j := range data {
					data[j] = float32(10*i + j)
				}
				ts = append(ts, safetensors.WriteTensor{Name: s.Name, DType: safetensors.F32, Shape: s.Shape, Data: data})
			}
			b := New(checkpoint(t, ts...))
			var m model
			b.Struct("", &m, dims, tc.conds)
			require.NoError(t, b.Err)
			require.Len(t, m.Blocks, 2)
			require.Equal(t, 2, m.Blocks[1].W.Rows)
			require.Equal(t, 4, m.Blocks[1].W.Cols)
			require.Equal(t, []float32{0, 1}, m.Blocks[0].Norm.W)
			require.Equal(t, tc.conds["rms"], m.Blocks[0].Norm.B == nil)
			require.Equal(t, tc.conds["post"], m.Post != nil)
			require.Len(t, b.Used, len(spec.Spec))
		})
	}
}

func TestStructErrors(t *testing.T) {
	type badShape struct {
		W []float32 `ckpt:"w" shape:"X"`
	}
	type badType struct {
		N int `ckpt:"n"`
	}
	for _, tc := range []struct {
		name string
		v    any
		want string
	}{
		{"unknown dimension", &badShape{}, `unknown dimension "X"`},
		{"unbindable field", &badType{}, "cannot bind a field of type int"},
		{"not a pointer", model{}, "wants a pointer to a struct"},
		{"no length", &struct {
			B []block `ckpt:"b" n:"missing"`
		}{}, `no length "missing"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := New(nil)
			b.Struct("", tc.v, map[string]int{}, nil)
			require.ErrorContains(t, b.Err, tc.want)
		})
	}
	// a missing tensor names it with its expected shape
	b := New(checkpoint(t, safetensors.WriteTensor{Name: "other", DType: safetensors.F32, Shape: []int{1}, Data: []float32{1}}))
	b.Struct("", &model{}, map[string]int{"D": 2, "layers": 1}, nil)
	require.ErrorContains(t, b.Err, "tensor blocks.0.norm.weight: missing from checkpoint (expected shape [2])")
}

// TestHeaderOnly: a HeaderOnly binder makes the checks a bind makes — the
// same error, or none, and the same tensors marked used — and reads no
// tensor data.
func TestHeaderOnly(t *testing.T) {
	dims, conds := map[string]int{"D": 2, "layers": 1}, map[string]bool{"post": true, "rms": true}
	f32 := func(name string, shape ...int) safetensors.WriteTensor {
		n := 1
		for _, d := range shape {
			n *= d
		}
		return safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: make([]float32, n)}
	}
	good := []safetensors.WriteTensor{f32("blocks.0.norm.weight", 2), f32("blocks.0.w.weight", 2, 2, 2), f32("post.weight", 3)}
	with := func(i int, w safetensors.WriteTensor) []safetensors.WriteTensor {
		ts := append([]safetensors.WriteTensor(nil), good...)
		ts[i] = w
		return ts
	}
	i8 := func(name string, shape ...int) safetensors.WriteTensor {
		w := f32(name, shape...)
		w.DType = safetensors.I8
		return w
	}
	for _, tc := range []struct {
		name string
		ts   []safetensors.WriteTensor
		q8   bool
		want string // "" : no error
	}{
		{"good", good, false, ""},
		{"missing", good[1:], false, "tensor blocks.0.norm.weight: missing from checkpoint (expected shape [2])"},
		{"mis-shaped matrix", with(1, f32("blocks.0.w.weight", 2, 4)), false, "tensor blocks.0.w.weight: expected shape [2 2 2], found [2 4]"},
		{"int8 without quantization", with(1, i8("blocks.0.w.weight", 2, 2, 2)), false, "dtype I8 needs a quantization_config"},
		{"int8 vector", with(2, i8("post.weight", 3)), true, `"post.weight": dtype I8 cannot be converted to float32`},
		{"int8 matrix without its scale", with(1, i8("blocks.0.w.weight", 2, 2, 2)), true, "tensor blocks.0.w.weight_scale: missing"},
		{"unsupported dtype", with(0, safetensors.WriteTensor{Name: "blocks.0.norm.weight", DType: safetensors.U8, Shape: []int{2}, Data: []float32{1, 2}}), false, "dtype U8 is not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bindWith := func(headerOnly bool) (*Binder, *safetensors.Recorder, *safetensors.Checkpoint) {
				ck, rec, err := safetensors.RecordTensors(tc.ts)
				require.NoError(t, err)
				b := New(ck)
				b.Q8, b.HeaderOnly = tc.q8, headerOnly
				var m model
				b.Struct("", &m, dims, conds)
				if headerOnly {
					require.Nil(t, m.Blocks[0].W, "HeaderOnly bound a matrix")
					require.Nil(t, m.Blocks[0].Norm.W, "HeaderOnly bound a vector")
				}
				return b, rec, ck
			}
			full, _, _ := bindWith(false)
			check, rec, ck := bindWith(true)
			requireLikeBind(t, full, check, rec, ck, tc.want)
		})
	}
}

// TestHeaderOnlyMXFP4: a packed MXFP4 matrix (and a vector stored so) is
// checked from its header — the same error as a bind for a bad scale
// tensor — and neither tensor is read.
func TestHeaderOnlyMXFP4(t *testing.T) {
	u8 := func(name string, shape ...int) safetensors.WriteTensor {
		return safetensors.WriteTensor{Name: name, DType: safetensors.U8, Shape: shape, Data: make([]float32, shape[0]*shape[1])}
	}
	for _, tc := range []struct {
		name string
		ts   []safetensors.WriteTensor
		want string
	}{
		{"good", []safetensors.WriteTensor{u8("m.weight_packed", 2, 16), u8("m.weight_scale", 2, 1), u8("v.weight_packed", 1, 16), u8("v.weight_scale", 1, 1)}, ""},
		{"bad scale", []safetensors.WriteTensor{u8("m.weight_packed", 2, 16), u8("m.weight_scale", 2, 2), u8("v.weight_packed", 1, 16), u8("v.weight_scale", 1, 1)},
			"tensor m.weight_scale: expected U8 [2 1]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			run := func(headerOnly bool) (*Binder, *safetensors.Recorder, *safetensors.Checkpoint) {
				ck, rec, err := safetensors.RecordTensors(tc.ts)
				require.NoError(t, err)
				b := New(ck)
				b.MXFP4, b.HeaderOnly = func(string) bool { return true }, headerOnly
				m, v := b.Mat("m.weight", 2, 32), b.Vec("v.weight", 1, 32)
				if headerOnly {
					require.Nil(t, m)
					require.Nil(t, v)
				}
				return b, rec, ck
			}
			full, _, _ := run(false)
			check, rec, ck := run(true)
			requireLikeBind(t, full, check, rec, ck, tc.want)
		})
	}
}

// requireLikeBind requires a HeaderOnly binder (check, over the checkpoint
// ck read through rec) to end as a real bind (full) did — no error, or
// full's error (containing want) — with the same tensors used, having
// read no tensor's data.
func requireLikeBind(t *testing.T, full, check *Binder, rec *safetensors.Recorder, ck *safetensors.Checkpoint, want string) {
	t.Helper()
	if want == "" {
		require.NoError(t, full.Err)
		require.NoError(t, check.Err)
	} else {
		require.ErrorContains(t, full.Err, want)
		require.EqualError(t, check.Err, full.Err.Error())
	}
	require.Equal(t, full.Used, check.Used)
	for _, n := range ck.Names() {
		tt, _ := ck.Tensor(n)
		require.Empty(t, rec.Overlaps(tt), "HeaderOnly read %s", n)
	}
}
