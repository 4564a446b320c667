package safetensors

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAssemble(t *testing.T) {
	src := BytesSource(make([]byte, 64))
	srcs := func() map[string]Source { return map[string]Source{"a": src} }
	ck, err := Assemble(srcs(), []*Tensor{
		{Name: "w", DType: F32, Shape: []int{2, 4}, Offset: 0, Size: 32, Shard: "a"},
		{Name: "q", DType: "Q4_K", Shape: []int{1, 256}, Offset: 32, Size: 32, Shard: "a"},
	}, nil)
	require.NoError(t, err)
	b, err := ck.Bytes("q")
	require.NoError(t, err)
	assert.Len(t, b, 32)
	_, err = ck.Float32("q")
	assert.ErrorContains(t, err, "cannot be converted")

	for _, c := range []struct {
		t    *Tensor
		want string
	}{
		{&Tensor{Name: "x", DType: F32, Shape: []int{20}, Offset: 0, Size: 80, Shard: "a"}, `tensor "x": data [0, 80) outside the 64-byte source a`},
		{&Tensor{Name: "x", DType: F32, Shape: []int{4}, Offset: 0, Size: 8, Shard: "a"}, `tensor "x": 8 bytes for shape [4] of F32`},
		{&Tensor{Name: "x", DType: F32, Shape: []int{1}, Offset: 0, Size: 4, Shard: "b"}, `tensor "x": no source "b"`},
		{&Tensor{Name: "x", DType: F32, Shape: []int{1}, Offset: -4, Size: 4, Shard: "a"}, `tensor "x": data [-4, 0)`},
	} {
		_, err := Assemble(srcs(), []*Tensor{c.t}, nil)
		assert.ErrorContains(t, err, c.want)
	}
}
