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
