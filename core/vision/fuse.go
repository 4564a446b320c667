package vision

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/tensor"
)

// ExpandPlaceholders replaces the i-th occurrence of placeholder in ids by
// counts[i] copies of it (the prompt carries one placeholder per image; the
// model sees one per image token). The number of occurrences must equal
// len(counts).
func ExpandPlaceholders(ids []int, placeholder int, counts []int) ([]int, error) {
	found := 0
	total := 0
	for _, id := range ids {
		if id == placeholder {
			found++
		}
	}
	if found != len(counts) {
		return nil, fmt.Errorf("expand placeholders: %d images but %d placeholder tokens (id %d) in the prompt", len(counts), found, placeholder)
	}
	for i, n := range counts {
		if n <= 0 {
			return nil, fmt.Errorf("expand placeholders: image %d has %d tokens (want > 0)", i, n)
		}
		total += n
	}
	out := make([]int, 0, len(ids)-found+total)
	i := 0
	for _, id := range ids {
		if id != placeholder {
			out = append(out, id)
			continue
		}
		for range counts[i] {
			out = append(out, placeholder)
		}
		i++
	}
	return out, nil
}

// Fuse builds the [T, d] input embeddings of an early-fusion prompt
// (T = len(ids), d = embed.Cols): row t is embed[ids[t]] for text tokens,
// and the placeholder rows are, in order, the rows of images[0], then
// images[1], … (each image [N_i, d] from Tower.Encode):
//
//	E[t] = embed[ids[t]]          if ids[t] ≠ placeholder
//	E[t] = img_rows[j], j-th placeholder so far   otherwise
//
// The placeholder count must equal Σ N_i exactly (no truncation), and
// every text id must lie in [0, embed.Rows).
func Fuse(ids []int, placeholder int, embed *tensor.Mat, images [][]float32) ([]float32, error) {
	if embed == nil {
		return nil, fmt.Errorf("fuse: no embedding matrix")
	}
	d := embed.Cols
	want := 0
	for i, im := range images {
		if len(im) == 0 || len(im)%d != 0 {
			return nil, fmt.Errorf("fuse: image %d has %d values, not a positive multiple of the hidden size %d", i, len(im), d)
		}
		want += len(im) / d
	}
	found := 0
	for t, id := range ids {
		if id == placeholder {
			found++
		} else if id < 0 || id >= embed.Rows {
			return nil, fmt.Errorf("fuse: token %d (index %d) is outside the vocabulary [0, %d)", id, t, embed.Rows)
		}
	}
	if found != want {
		return nil, fmt.Errorf("fuse: expected %d placeholder tokens (id %d) for %d image(s), found %d", want, placeholder, len(images), found)
	}
	out := make([]float32, len(ids)*d)
	img, row := 0, 0
	for t, id := range ids {
		dst := out[t*d : (t+1)*d]
		if id != placeholder {
			copy(dst, embed.Row(id, dst))
			continue
		}
		for row*d >= len(images[img]) {
			img, row = img+1, 0
		}
		copy(dst, images[img][row*d:(row+1)*d])
		row++
	}
	return out, nil
}
