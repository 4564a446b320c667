package safetensors

import (
	"bytes"
	"io/fs"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestRecorder: opening reads only the header; each tensor read is
// recorded over exactly that tensor's data (the in-memory Bytes of the
// wrapped source hidden), and CheckFloat32 reads nothing.
func TestRecorder(t *testing.T) {
	ts := testTensors(F16)
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, ts, nil))
	rec := NewRecorder(BytesSource(buf.Bytes()))
	c, err := Open(func(name string) (Source, error) {
		if name != SingleFileName {
			return nil, fs.ErrNotExist
		}
		return rec, nil
	})
	require.NoError(t, err)
	defer c.Close()
	for _, n := range c.Names() {
		tt, _ := c.Tensor(n)
		require.Empty(t, rec.Overlaps(tt), "%s read at open", n)
	}
	emb, _ := c.Tensor("model.embed_tokens.weight")
	norm, _ := c.Tensor("model.norm.weight")
	require.NoError(t, c.CheckFloat32(norm.Name))
	require.Empty(t, rec.Overlaps(norm), "CheckFloat32 read data")
	b, err := c.Bytes(emb.Name)
	require.NoError(t, err)
	require.False(t, &b[0] == &buf.Bytes()[emb.Offset], "Bytes aliases the hidden memory")
	require.Equal(t, []Range{{emb.Offset, emb.Size}}, rec.Overlaps(emb))
	require.Empty(t, rec.Overlaps(norm))
	_, err = c.Float32(norm.Name)
	require.NoError(t, err)
	require.Equal(t, []Range{{norm.Offset, norm.Size}}, rec.Overlaps(norm))
}

// TestCheckFloat32 gives Float32's errors without reading.
func TestCheckFloat32(t *testing.T) {
	ts := []WriteTensor{{Name: "f", DType: BF16, Shape: []int{2}, Data: []float32{1, 2}}}
	var buf bytes.Buffer
	require.NoError(t, Write(&buf, ts, nil))
	data := buf.Bytes()
	c, err := Open(MemOpener(map[string][]byte{SingleFileName: rawFile(`{"i":{"dtype":"I8","shape":[2],"data_offsets":[0,2]}}`, []byte{1, 2})}))
	require.NoError(t, err)
	_, want := c.Float32("i")
	require.ErrorContains(t, want, "cannot be converted to float32")
	require.Equal(t, want, c.CheckFloat32("i"))
	require.ErrorContains(t, c.CheckFloat32("nope"), `no tensor "nope"`)
	c2, err := Open(MemOpener(map[string][]byte{SingleFileName: data}))
	require.NoError(t, err)
	require.NoError(t, c2.CheckFloat32("f"))
	require.NoError(t, c2.Close())
	require.ErrorContains(t, c2.CheckFloat32("f"), "checkpoint is closed")
}
