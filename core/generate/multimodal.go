package generate

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"github.com/tessera-llm/tessera/core/vision"
)

// Encoder runs a vision tower and projector on one preprocessed image and
// returns its merged, projected tokens [px.Merged(), text_hidden_size]:
// vision.Tower.Encode on the CPU (CPUEncoder) or a GPU tower.
type Encoder interface {
	Encode(px *imageio.Patches) ([]float32, error)
}

// CPUEncoder encodes images with the model's CPU vision tower on r's pool.
func CPUEncoder(r *model.Runner) Encoder { return cpuEncoder{r} }

type cpuEncoder struct{ r *model.Runner }

func (e cpuEncoder) Encode(px *imageio.Patches) ([]float32, error) {
	t, err := e.r.M.VisionTower()
	if err != nil {
		return nil, err
	}
	return t.Encode(e.r.Pool(), px)
}

// Multimodal builds the input of an image+text prompt (early fusion): ids
// holds one media placeholder (the config's media_placeholder_token_id)
// per image, in order; each image is decoded (header checked against lim
// first), resized to the patch grid, encoded by the vision tower and
// projector, and its placeholder expanded to as many tokens as the image
// yields. It returns the expanded ids and their input embeddings [T, d]:
// text rows from the embedding table, placeholder rows replaced in order
// by the image features.
func Multimodal(r *model.Runner, ids []int, images [][]byte, lim imageio.Limits) ([]int, []float32, error) {
	return MultimodalWith(r.M, CPUEncoder(r), ids, images, lim)
}

// MultimodalWith is Multimodal with the vision tower run by enc (e.g. on
// the GPU); the result is the same up to the encoder's rounding.
func MultimodalWith(m *model.Model, enc Encoder, ids []int, images [][]byte, lim imageio.Limits) ([]int, []float32, error) {
	if len(images) > 0 && !m.HasVision() {
		return nil, nil, fmt.Errorf("the model has no vision tower (no vision_config in config.json): images are not supported")
	}
	pxs := make([]*imageio.Patches, len(images))
	for i, data := range images {
		img, _, err := imageio.Decode(data, lim)
		if err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		if pxs[i], err = imageio.Preprocess(img, m.VisionCfg.Preprocess()); err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
	}
	return FusePatches(m, enc, ids, pxs)
}

// FusePatches is MultimodalWith for images already decoded and
// preprocessed (the browser decodes images itself and hands over RGBA
// pixels: imageio.FromRGBA, imageio.Preprocess).
func FusePatches(m *model.Model, enc Encoder, ids []int, pxs []*imageio.Patches) ([]int, []float32, error) {
	if len(pxs) > 0 && !m.HasVision() {
		return nil, nil, fmt.Errorf("the model has no vision tower (no vision_config in config.json): images are not supported")
	}
	if len(pxs) > 0 && enc == nil {
		return nil, nil, fmt.Errorf("images given without a vision encoder")
	}
	ph := m.Cfg.MediaPlaceholderTokenID
	feats := make([][]float32, len(pxs))
	counts := make([]int, len(pxs))
	for i, px := range pxs {
		var err error
		if feats[i], err = enc.Encode(px); err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		counts[i] = px.Merged()
		if want := counts[i] * m.Cfg.HiddenSize; len(feats[i]) != want {
			return nil, nil, fmt.Errorf("image %d: the encoder returned %d values, want %d (%d tokens of width %d)",
				i+1, len(feats[i]), want, counts[i], m.Cfg.HiddenSize)
		}
	}
	full := ids
	if len(pxs) > 0 {
		var err error
		if full, err = vision.ExpandPlaceholders(ids, ph, counts); err != nil {
			return nil, nil, err
		}
	}
	emb, err := vision.Fuse(full, ph, m.EmbedTokens, feats)
	if err != nil {
		return nil, nil, err
	}
	return full, emb, nil
}

// ImagePrompt returns prompt preceded by one media placeholder per image:
// each wrapped in the Kimi media markers (tokenizer.KimiImage) when the
// codec knows them, else the bare placeholder id (models without a chat
// tokenizer). Multimodal then expands each placeholder to the image's
// token count.
func ImagePrompt(codec tokenizer.Codec, placeholder, images int, prompt []int) ([]int, error) {
	var ids []int
	for i := 0; i < images; i++ {
		if _, ok := codec.TokenID("<|media_start|>"); ok {
			mark, err := codec.Encode(tokenizer.KimiImage)
			if err != nil {
				return nil, err
			}
			ids = append(ids, mark...)
		} else {
			ids = append(ids, placeholder)
		}
	}
	return append(ids, prompt...), nil
}
