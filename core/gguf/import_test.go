package gguf

import (
	"bytes"
	"cmp"
	"encoding/binary"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tensor"
	"github.com/tessera-llm/tessera/core/tokenizer"
)

// logitsOf runs tokens through m in one call and returns every token's
// logits.
func logitsOf(t *testing.T, m *model.Model, tokens []int) []float32 {
	t.Helper()
	r := model.NewRunner(m, model.Options{Workers: 1})
	defer r.Close()
	out := make([]float32, len(tokens)*m.Cfg.VocabSize)
	require.NoError(t, r.Forward(m.NewState(), tokens, out))
	return out
}

// maxAbsDiff is max_i |a[i] − b[i]|.
func maxAbsDiff(a, b []float32) float64 {
	var d float64
	for i := range a {
		d = max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func testTokens(V, n int) []int {
	ids := make([]int, n)
	for i := range ids {
		ids[i] = (i*37 + 11) % V
	}
	return ids
}

// exportFile exports dir to a GGUF file of type typ and returns its path.
func exportFile(t *testing.T, dir, typ string, noVocab bool) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, Export(dir, out, ExportOptions{Type: typ, NoVocab: noVocab}))
	return out
}

func TestImportLogitsEqualOriginal(t *testing.T) {
	for _, s := range []modelSpec{
		{preset: "k3-nano", layout: "kimi_linear"},
		{preset: "k3-nano", layout: "kimi_k3"},
		{preset: "kimi-linear-nano"},
	} {
		t.Run(s.preset+"/"+s.layout, func(t *testing.T) {
			dir := makeModel(t, s)
			want, ck, err := model.OpenDir(dir)
			require.NoError(t, err)
			defer ck.Close()
			path := exportFile(t, dir, "f32", false)
			got, gck, err := model.OpenDir(path)
			require.NoError(t, err)
			defer gck.Close()
			// The config round-trips, layout and tying aside (an id-only
			// vocabulary carries no BOS/EOS ids).
			wc, gc := *want.Cfg, *got.Cfg
			wc.Layout, wc.TieWordEmbed, wc.Text, wc.NumExpertGroup, wc.TopKGroup = gc.Layout, gc.TieWordEmbed, nil, 1, 1
			wc.BOSTokenID, wc.EOSTokenIDs = -1, nil
			gc.Text = nil
			assert.Equal(t, wc, gc)
			// F32 weights and per-expert slices are views of the mapped file.
			assert.Equal(t, tensor.F32, got.Layers[0].MLP.GateProj.DType)
			b, err := gck.Bytes("model.layers.0.mlp.gate_proj.weight")
			require.NoError(t, err)
			assert.Equal(t, unsafe.Pointer(&b[0]), unsafe.Pointer(&got.Layers[0].MLP.GateProj.F32[0]), "gate_proj copied")
			e := got.Layers[1].MoE.Experts[3].DownProj
			b, err = gck.Bytes("model.layers.1.block_sparse_moe.experts.3.w2.weight")
			require.NoError(t, err)
			assert.Equal(t, unsafe.Pointer(&b[0]), unsafe.Pointer(&e.F32[0]), "expert 3 copied")
			ids := testTokens(want.Cfg.VocabSize, 12)
			la, lb := logitsOf(t, want, ids), logitsOf(t, got, ids)
			assert.LessOrEqual(t, maxAbsDiff(la, lb), 1e-5)
		})
	}
}

// TestImportBlocksInPlace: quantized weights keep their raw blocks, in the
// mapped file.
func TestImportBlocksInPlace(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano"})
	for _, typ := range []string{"q4_0", "mxfp4", "q8_0"} {
		path := exportFile(t, dir, typ, true)
		m, ck, err := model.OpenDir(path)
		require.NoError(t, err)
		w := m.Layers[1].MoE.Experts[2].UpProj
		want := map[string]tensor.DType{"q4_0": tensor.Q4_0, "mxfp4": tensor.MXFP4, "q8_0": tensor.Q8_0}[typ]
		assert.Equal(t, want, w.DType, typ)
		b, err := ck.Bytes("model.layers.1.block_sparse_moe.experts.2.w3.weight")
		require.NoError(t, err)
		assert.Equal(t, unsafe.Pointer(&b[0]), unsafe.Pointer(&w.Q[0]), typ)
		assert.Len(t, w.Q, w.Rows*want.RowBytes(w.Cols))
		ck.Close()
	}
}

func TestImportK3MicroWithTokenizer(t *testing.T) {
	dir := filepath.Join("..", "..", "models", "k3-micro")
	want, ck, err := model.OpenDir(dir)
	require.NoError(t, err)
	defer ck.Close()
	path := exportFile(t, dir, "f32", false)
	got, gck, err := model.OpenDir(path)
	require.NoError(t, err)
	defer gck.Close()

	wantTok, err := tokenizer.LoadCodec(dir, want.Cfg.VocabSize)
	require.NoError(t, err)
	gotTok, err := LoadCodec(path, got.Cfg.VocabSize)
	require.NoError(t, err)
	text := "The quick brown fox jumps over the lazy dog. <|im_end|> Ünïcödé, 12345 tokens!\n\nnew  lines"
	wi, err := wantTok.Encode(text)
	require.NoError(t, err)
	gi, err := gotTok.Encode(text)
	require.NoError(t, err)
	require.Equal(t, wi, gi)
	id, ok := gotTok.TokenID("<|im_end|>")
	assert.True(t, ok)
	assert.Equal(t, 4081, id)

	a, b := logitsOf(t, want, wi), logitsOf(t, got, gi)
	assert.LessOrEqual(t, maxAbsDiff(a, b), 1e-5)

	// An id-only GGUF gives the byte codec.
	bare := exportFile(t, dir, "f16", true)
	c, err := LoadCodec(bare, got.Cfg.VocabSize)
	require.NoError(t, err)
	_, isByte := c.(tokenizer.ByteCodec)
	assert.True(t, isByte)
}

func TestImportRefusesByName(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano"})
	path := exportFile(t, dir, "f32", true)
	raw, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := Open(path)
	require.NoError(t, err)
	ti, _ := f.Tensor("blk.1.attn_q.weight")
	name := ti.Name
	f.Close()

	// An unknown ggml type: rewrite the type field of one tensor info in
	// place (the name is followed by n_dims, ne and the type).
	bad := append([]byte(nil), raw...)
	i := indexOf(bad, []byte(name))
	require.Positive(t, i)
	p := i + len(name)
	nd := int(bad[p])
	typeAt := p + 4 + 8*nd
	bad[typeAt] = byte(TypeIQ2_XXS)
	// IQ2_XXS has 256-element blocks: keep the file parseable only if the
	// row fits; either way the error names the tensor.
	bp := filepath.Join(t.TempDir(), "bad.gguf")
	require.NoError(t, os.WriteFile(bp, bad, 0o644))
	_, _, err = model.OpenDir(bp)
	require.Error(t, err)
	assert.Contains(t, err.Error(), name)

	// Truncated data.
	tp := filepath.Join(t.TempDir(), "trunc.gguf")
	require.NoError(t, os.WriteFile(tp, raw[:len(raw)-100], 0o644))
	_, _, err = model.OpenDir(tp)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "tensor")
}

func indexOf(b, sub []byte) int {
	for i := 0; i+len(sub) <= len(b); i++ {
		if string(b[i:i+len(sub)]) == string(sub) {
			return i
		}
	}
	return -1
}

// TestImportHostileExpertCount: a header claiming far more experts than the
// file holds is refused before the per-expert tensor list is built.
func TestImportHostileExpertCount(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano"})
	f, err := Open(exportFile(t, dir, "f32", true))
	require.NoError(t, err)
	defer f.Close()
	w := NewWriter()
	for _, kv := range f.KVs {
		v := kv.Value
		if kv.Key == ArchKimiK3+".expert_count" {
			v = uint32(60000)
		}
		require.NoError(t, w.Add(kv.Key, v))
	}
	for _, ti := range f.Tensors {
		b, err := f.TensorData(ti.Name)
		require.NoError(t, err)
		require.NoError(t, w.AddTensor(ti.Name, ti.Type, ti.Ne, func() ([]byte, error) { return b, nil }))
	}
	var buf bytes.Buffer
	_, err = w.WriteTo(&buf)
	require.NoError(t, err)
	g, err := Parse(bytes.NewReader(buf.Bytes()), int64(buf.Len()), Limits{})
	require.NoError(t, err)
	_, _, err = ImportCheckpoint(g)
	assert.ErrorContains(t, err, "blk.1.ffn_gate_exps.weight")
	assert.ErrorContains(t, err, "60000 experts")
}

// readLog is a GGUF file's bytes that records where each read starts.
type readLog struct {
	b    []byte
	offs []int64
}

func (r *readLog) ReadAt(p []byte, off int64) (int, error) {
	r.offs = append(r.offs, off)
	return bytes.NewReader(r.b).ReadAt(p, off)
}

func (r *readLog) Size() int64 { return int64(len(r.b)) }

// TestImportReadsInFileOrder: importing reads the header only (the
// converted tensors wait for the model to read them), and binding reads
// the file front to back, never further back than one layer's tensors span,
// so a browser binds the parts of a download it has while later ones come.
func TestImportReadsInFileOrder(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano", layout: "kimi_k3"})
	b, err := os.ReadFile(exportFile(t, dir, "q8_0", true))
	require.NoError(t, err)
	src := &readLog{b: b}
	f, err := Parse(src, src.Size(), Limits{})
	require.NoError(t, err)
	src.offs = nil
	cfg, ck, err := ImportCheckpoint(f)
	require.NoError(t, err)
	defer ck.Close()
	for _, off := range src.offs {
		assert.Less(t, uint64(off), f.DataOffset, "import read tensor data")
	}
	for _, name := range []string{"A_log", "kv_b_proj.weight", "attn_res_proj.weight"} {
		n := 0
		for _, s := range ck.Names() {
			if tt, _ := ck.Tensor(s); tt.Shard == convShard && strings.HasSuffix(s, name) {
				n++
			}
		}
		assert.Positive(t, n, "no converted %s tensor: the test misses a conversion", name)
	}

	span := map[string][2]uint64{} // a layer's first and last byte
	for _, g := range f.Tensors {
		blk, _, ok := strings.Cut(strings.TrimPrefix(g.Name, "blk."), ".")
		if !ok || !strings.HasPrefix(g.Name, "blk.") {
			continue
		}
		lo, hi := f.DataOffset+g.Offset, f.DataOffset+g.Offset+g.Size
		if s, ok := span[blk]; ok {
			lo, hi = min(lo, s[0]), max(hi, s[1])
		}
		span[blk] = [2]uint64{lo, hi}
	}
	layer := uint64(0)
	for _, s := range span {
		layer = max(layer, s[1]-s[0])
	}
	src.offs = nil
	_, err = model.Load(cfg, ck)
	require.NoError(t, err)
	require.NotEmpty(t, src.offs)
	far := int64(0)
	for i, off := range src.offs {
		assert.LessOrEqual(t, uint64(far-min(far, off)), layer, "read %d at %d after one at %d", i, off, far)
		far = max(far, off)
	}
}

// TestConvSourceReadAt: any range of the converted tensors reads as the
// same bytes as the whole, across tensor boundaries and inside a float.
func TestConvSourceReadAt(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano", layout: "kimi_k3"})
	f, err := Open(exportFile(t, dir, "f16", true))
	require.NoError(t, err)
	defer f.Close()
	cfg, err := importConfig(f)
	require.NoError(t, err)
	im := &importer{f: f, cfg: cfg, arch: f.Architecture()}
	for _, s := range model.Spec(cfg) {
		require.NoError(t, im.bind(s))
	}
	cs := &im.conv
	require.Greater(t, len(cs.items), 1)
	all := make([]byte, cs.Size())
	n, err := cs.ReadAt(all, 0)
	require.NoError(t, err)
	require.Equal(t, len(all), n)
	second := cs.items[1].off
	for _, r := range []struct{ off, n int64 }{{0, 1}, {1, 6}, {3, 2}, {second - 3, 7}, {second, 4}, {cs.Size() - 5, 5}, {7, cs.Size() - 7}} {
		p := make([]byte, r.n)
		n, err := cs.ReadAt(p, r.off)
		require.NoError(t, err, "%+v", r)
		assert.Equal(t, int(r.n), n)
		assert.Equal(t, all[r.off:r.off+r.n], p, "%+v", r)
	}
	p := make([]byte, 8)
	n, err = cs.ReadAt(p, cs.Size()-3)
	assert.Equal(t, 3, n)
	assert.ErrorIs(t, err, io.EOF)
	assert.Equal(t, all[len(all)-3:], p[:3])
	_, err = cs.ReadAt(p, cs.Size()+1)
	assert.ErrorContains(t, err, "read at offset")

	// A tensor read in chunks (as safetensors' ReadFloat32 reads, 1 MiB at
	// a time) is converted once, and not kept once read to its end.
	big := slices.MaxFunc(cs.items, func(a, b convItem) int { return cmp.Compare(a.n, b.n) })
	require.Greater(t, big.n, int64(64))
	runs := cs.runs
	got := make([]byte, big.n)
	for at := int64(0); at < big.n; at += 60 {
		n, err := cs.ReadAt(got[at:min(big.n, at+60)], big.off+at)
		require.NoError(t, err)
		require.Equal(t, int(min(big.n-at, 60)), n)
	}
	assert.Equal(t, all[big.off:big.off+big.n], got)
	assert.Equal(t, runs+1, cs.runs, "conversions for one tensor read in %d-byte chunks", 60)
	assert.Nil(t, cs.x, "values kept after the tensor was read to its end")
}

// TestImportBadSsmA: a non-negative ssm_a (−exp(A_log) must be negative)
// fails the load, naming the tensor and the element.
func TestImportBadSsmA(t *testing.T) {
	dir := makeModel(t, modelSpec{preset: "k3-nano"})
	path := exportFile(t, dir, "f32", true)
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	f, err := Parse(bytes.NewReader(b), int64(len(b)), Limits{})
	require.NoError(t, err)
	g, ok := f.Tensor("blk.0.ssm_a")
	require.True(t, ok)
	require.Equal(t, TypeF32, g.Type)
	binary.LittleEndian.PutUint32(b[f.DataOffset+g.Offset+4:], math.Float32bits(0.5))
	f, err = Parse(bytes.NewReader(b), int64(len(b)), Limits{})
	require.NoError(t, err)
	_, _, err = LoadModel(f, false)
	assert.ErrorContains(t, err, "tensor blk.0.ssm_a: element 1 is 0.5; ssm_a = −exp(A_log) must be negative")
}
