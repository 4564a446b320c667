package generate

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/tokenizer"
	"github.com/tessera-llm/tessera/core/vision"
)

// Multimodal builds the input of an image+text prompt (early fusion): ids
// holds one media placeholder (the config's media_placeholder_token_id)
// per image, in order; each image is decoded (header checked against lim
// first), resized to the patch grid, encoded by the vision tower and
// projector, and its placeholder expanded to as many tokens as the image
// yields. It returns the expanded ids and their input embeddings [T, d]:
// text rows from the embedding table, placeholder rows replaced in order
// by the image features.
func Multimodal(r *model.Runner, ids []int, images [][]byte, lim imageio.Limits) ([]int, []float32, error) {
	m := r.M
	if len(images) > 0 && m.Vision == nil {
		return nil, nil, fmt.Errorf("the model has no vision tower (no vision_config in config.json): images are not supported")
	}
	ph := m.Cfg.MediaPlaceholderTokenID
	feats := make([][]float32, len(images))
	counts := make([]int, len(images))
	for i, data := range images {
		img, _, err := imageio.Decode(data, lim)
		if err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		px, err := imageio.Preprocess(img, m.VisionCfg.Preprocess())
		if err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		if feats[i], err = m.Vision.Encode(r.Pool(), px); err != nil {
			return nil, nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		counts[i] = px.Merged()
	}
	full := ids
	if len(images) > 0 {
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
