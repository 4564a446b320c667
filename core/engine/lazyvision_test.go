package engine

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
)

// recordedOpener serves files, the checkpoint through a Recorder.
func recordedOpener(files map[string][]byte) (safetensors.Opener, *safetensors.Recorder) {
	rec := safetensors.NewRecorder(safetensors.BytesSource(files[safetensors.SingleFileName]))
	mem := safetensors.MemOpener(files)
	return func(name string) (safetensors.Source, error) {
		if name == safetensors.SingleFileName {
			return rec, nil
		}
		return mem(name)
	}, rec
}

// visionBytes counts the bytes of vision tensor data (vision_tower.*,
// mm_projector.*) that rec's reads touched, and how many of those tensors.
func visionBytes(ck *safetensors.Checkpoint, rec *safetensors.Recorder) (read int64, tensors int) {
	for _, n := range ck.Names() {
		tt, _ := ck.Tensor(n)
		if !vision.IsVisionTensor(n) {
			continue
		}
		if rs := rec.Overlaps(tt); len(rs) > 0 {
			tensors++
			for _, r := range rs {
				read += min(r.Off+r.N, tt.Offset+tt.Size) - max(r.Off, tt.Offset)
			}
		}
	}
	return read, tensors
}

// eagerEncoder encodes on a vision tower bound before any image (the
// load path before lazy binding), on a CPU runner's pool as NewCPUEncoder.
func eagerEncoder(t *testing.T, e *Engine) {
	t.Helper()
	tw, err := vision.Load(e.Model.VisionCfg, e.ck)
	require.NoError(t, err)
	r := model.NewRunner(e.Model, model.Options{MaxChunk: 1})
	t.Cleanup(r.Close)
	e.NewEncoder = func(*model.Model) (generate.Encoder, func(), error) { return poolEncoder{tw, r}, nil, nil }
}

type poolEncoder struct {
	t *vision.Tower
	r *model.Runner
}

func (p poolEncoder) Encode(px *imageio.Patches) ([]float32, error) {
	return p.t.Encode(p.r.Pool(), px)
}

// imageRun generates greedily from prompt with images.
func imageRun(t *testing.T, e *Engine, images ...Image) []int {
	t.Helper()
	var ids []int
	_, err := e.Generate(context.Background(), Options{Prompt: "What is in the picture?", Images: images, MaxTokens: 10}, func(p Piece) bool {
		ids = append(ids, p.ID)
		return true
	})
	require.NoError(t, err)
	return ids
}

// TestVisionReadOnFirstImage: loading a vision model and generating from
// text read no byte of the vision tower's tensors; the first image reads
// them all and gives the ids of a tower bound eagerly at load; a second
// image reads none again.
func TestVisionReadOnFirstImage(t *testing.T) {
	files := visionFiles(t)
	open, rec := recordedOpener(files)
	e, err := Load(open)
	require.NoError(t, err)
	defer e.Close()
	require.True(t, e.Info().Vision)
	var text []int
	_, err = e.Generate(context.Background(), Options{Prompt: "Hello", MaxTokens: 6}, func(p Piece) bool { text = append(text, p.ID); return true })
	require.NoError(t, err)
	require.NotEmpty(t, text)
	b, n := visionBytes(e.ck, rec)
	require.Zero(t, b, "load and a text-only generation read %d bytes of %d vision tensors", b, n)

	eager, err := Load(safetensors.MemOpener(files))
	require.NoError(t, err)
	defer eager.Close()
	eagerEncoder(t, eager)
	a, c := testRGBA(64, 48), testRGBA(30, 90)
	imgA := Image{Width: 64, Height: 48, RGBA: a.Pix}
	imgC := Image{Width: 30, Height: 90, RGBA: c.Pix}

	got := imageRun(t, e, imgA)
	require.Equal(t, imageRun(t, eager, imgA), got, "first image: lazy and eager towers differ")
	b, n = visionBytes(e.ck, rec)
	require.Equal(t, len(vision.Spec(e.Model.VisionCfg)), n, "the first image read %d of the vision tensors", n)
	var size int64
	for _, name := range e.ck.Names() {
		if tt, _ := e.ck.Tensor(name); vision.IsVisionTensor(name) {
			size += tt.Size
		}
	}
	require.Equal(t, size, b, "the first image read the vision tensors once each")
	tw, err := e.Model.VisionTower()
	require.NoError(t, err)

	reads := len(rec.Ranges())
	got = imageRun(t, e, imgC)
	require.Equal(t, imageRun(t, eager, imgC), got, "second image")
	require.Len(t, rec.Ranges(), reads, "the second image read the checkpoint")
	again, err := e.Model.VisionTower()
	require.NoError(t, err)
	require.Same(t, tw, again)
	require.False(t, slices.Equal(got, text))
}

// TestVisionLoadErrorsEngine: a vision checkpoint with a tensor missing
// or mis-shaped fails to load (Load as the browser, Open natively), the
// tensor named, before any image.
func TestVisionLoadErrorsEngine(t *testing.T) {
	const name = "vision_tower.encoder.blocks.0.mlp.fc1.weight"
	edit := func(t *testing.T, f func(ts []safetensors.WriteTensor) []safetensors.WriteTensor) map[string][]byte {
		files := visionFiles(t)
		ck, err := safetensors.Open(safetensors.MemOpener(files))
		require.NoError(t, err)
		var ts []safetensors.WriteTensor
		for _, n := range ck.Names() {
			tt, _ := ck.Tensor(n)
			v, err := ck.Float32(n)
			require.NoError(t, err)
			ts = append(ts, safetensors.WriteTensor{Name: n, DType: tt.DType, Shape: tt.Shape, Data: v})
		}
		var buf bytes.Buffer
		require.NoError(t, safetensors.Write(&buf, f(ts), nil))
		files[safetensors.SingleFileName] = buf.Bytes()
		return files
	}
	for _, tc := range []struct {
		name string
		f    func(ts []safetensors.WriteTensor) []safetensors.WriteTensor
		want string
	}{
		{"missing", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == name })
		}, "tensor " + name + ": missing from checkpoint"},
		{"mis-shaped", func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
			i := slices.IndexFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == name })
			ts[i] = safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: []int{4, 4}, Data: make([]float32, 16)}
			return ts
		}, "tensor " + name + ": expected shape"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := edit(t, tc.f)
			_, err := Load(safetensors.MemOpener(files))
			require.ErrorContains(t, err, tc.want, "Load")
			_, err = LoadDeferred(safetensors.MemOpener(files))
			require.ErrorContains(t, err, tc.want, "LoadDeferred")
			dir := t.TempDir()
			for n, b := range files {
				require.NoError(t, os.WriteFile(filepath.Join(dir, n), b, 0o644))
			}
			_, err = Open(dir, OpenOptions{})
			require.ErrorContains(t, err, tc.want, "Open")
		})
	}
}
