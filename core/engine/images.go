package engine

import (
	"errors"
	"fmt"

	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/vision"
)

// Image is one input image: an encoded file (Data: JPEG, PNG, GIF or WebP,
// checked against ImageLimits before decoding), or decoded pixels (a
// browser's ImageData: non-premultiplied RGBA, 4 bytes per pixel,
// row-major; transparent pixels are composited over white).
type Image struct {
	Width, Height int
	RGBA          []byte
	Data          []byte
}

// ImageLimits bound the images Generate accepts (imageio.DefaultLimits:
// 40 megapixels, 16384 pixels per side).
var ImageLimits = imageio.DefaultLimits

// ImageStats describe one input image of a generation.
type ImageStats struct {
	Width  int `json:"width"`
	Height int `json:"height"`
	// GridW×GridH patches after the smart resize; Tokens placeholder
	// tokens in the prompt.
	GridW  int `json:"gridW"`
	GridH  int `json:"gridH"`
	Tokens int `json:"tokens"`
}

// prepared is a prompt with its images preprocessed (not yet encoded):
// ids with every placeholder expanded, the prefix-cache key (ids with each
// image's tokens replaced by a negative hash of its pixels) and where each
// image's tokens start.
type prepared struct {
	ids, key []int
	pxs      []*imageio.Patches
	start    []int
	stats    []ImageStats
}

// prepareImages decodes and preprocesses images and expands their
// placeholders in ids (one media placeholder per image, in order).
func (e *Engine) prepareImages(ids []int, images []Image) (*prepared, error) {
	p := &prepared{ids: ids, key: ids}
	if len(images) == 0 {
		return p, nil
	}
	m := e.Model
	if !m.HasVision() {
		return nil, errors.New("this model has no vision tower (no vision_config in config.json): it cannot take images")
	}
	p.pxs = make([]*imageio.Patches, len(images))
	p.stats = make([]ImageStats, len(images))
	hashes := make([]int, len(images))
	counts := make([]int, len(images))
	for i, im := range images {
		var img *imageio.RGB
		var err error
		if im.Data != nil {
			img, _, err = imageio.Decode(im.Data, ImageLimits)
			hashes[i] = int(hashBytes(im.Data) >> 2)
		} else {
			img, err = imageio.FromRGBA(im.Width, im.Height, im.RGBA, ImageLimits)
			hashes[i] = int(hashBytes([]byte(fmt.Sprint(im.Width, im.Height)), im.RGBA) >> 2)
		}
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		if p.pxs[i], err = imageio.Preprocess(img, m.VisionCfg.Preprocess()); err != nil {
			return nil, fmt.Errorf("image %d (%dx%d): %w", i+1, img.W, img.H, err)
		}
		counts[i] = p.pxs[i].Merged()
		p.stats[i] = ImageStats{Width: img.W, Height: img.H, GridW: p.pxs[i].GridW, GridH: p.pxs[i].GridH, Tokens: counts[i]}
	}
	full, err := vision.ExpandPlaceholders(ids, e.Cfg.MediaPlaceholderTokenID, counts)
	if err != nil {
		return nil, err
	}
	p.ids, p.key = full, append([]int(nil), full...)
	ph, img, left := e.Cfg.MediaPlaceholderTokenID, -1, 0
	for i, id := range full {
		if id != ph {
			continue
		}
		if left == 0 {
			img++
			left = counts[img]
			p.start = append(p.start, i)
		}
		p.key[i] = -1 - hashes[img]
		left--
	}
	return p, nil
}

// embeddings encodes the images whose tokens lie at or after from and
// returns the input embeddings of ids[from:] (nil without images there).
// from never falls inside an image's tokens (the prefix cache keeps no
// snapshot there).
func (e *Engine) embeddings(p *prepared, from int) ([]float32, error) {
	var pxs []int
	for i, s := range p.start {
		if s >= from {
			pxs = append(pxs, i)
		}
	}
	if len(pxs) == 0 {
		return nil, nil
	}
	enc, free, err := e.NewEncoder(e.Model)
	if err != nil {
		return nil, fmt.Errorf("vision encoder: %w", err)
	}
	if free != nil {
		defer free()
	}
	feats := make([][]float32, len(pxs))
	for j, i := range pxs {
		if feats[j], err = enc.Encode(p.pxs[i]); err != nil {
			return nil, fmt.Errorf("image %d: %w", i+1, err)
		}
		if want := p.stats[i].Tokens * e.Cfg.HiddenSize; len(feats[j]) != want {
			return nil, fmt.Errorf("image %d: the encoder returned %d values, want %d", i+1, len(feats[j]), want)
		}
	}
	return vision.Fuse(p.ids[from:], e.Cfg.MediaPlaceholderTokenID, e.Model.EmbedTokens, feats)
}

// Embed places one media placeholder per image before ids (as `tessera run
// --image`), expands them and returns the ids with their input
// embeddings [len, hidden] (the images encoded on the engine's vision
// encoder); without images it returns ids and nil.
func (e *Engine) Embed(ids []int, images []Image) ([]int, []float32, error) {
	if len(images) == 0 {
		return ids, nil, nil
	}
	if !e.Model.HasVision() {
		return nil, nil, errors.New("the model has no vision tower (no vision_config in config.json)")
	}
	ids, err := generate.ImagePrompt(e.codec, e.Cfg.MediaPlaceholderTokenID, len(images), ids)
	if err != nil {
		return nil, nil, err
	}
	p, err := e.prepareImages(ids, images)
	if err != nil {
		return nil, nil, err
	}
	emb, err := e.embeddings(p, 0)
	return p.ids, emb, err
}
