package model

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/models/presets"
)

// TestLoadBindsLayersInFileOrder: a safetensors file keeps its tensors in
// name order (model.layers.10 before model.layers.2); the load reads the
// layers front to back through the file all the same, so a file read as
// it downloads binds what has arrived, and reads what lies after the
// layers (the final norm, the AttnRes read-out) last. Spec keeps index
// order.
func TestLoadBindsLayersInFileOrder(t *testing.T) {
	raw, err := presets.Read("k3-nano")
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(raw, &m))
	m["num_hidden_layers"] = 12
	lac, ok := m["linear_attn_config"].(map[string]any)
	require.True(t, ok, "k3-nano has no linear_attn_config")
	lac["kda_layers"], lac["full_attn_layers"] = []int{1, 2, 3, 5, 6, 7, 9, 10, 11}, []int{4, 8, 12}
	raw, err = json.Marshal(m)
	require.NoError(t, err)
	for _, layout := range []config.Layout{config.LayoutKimiLinear, config.LayoutKimiK3} {
		t.Run(layout.String(), func(t *testing.T) {
			cfg, err := config.Parse(raw)
			require.NoError(t, err)
			cfg.Layout = layout
			ts, err := RandomCheckpoint(cfg, 1, safetensors.BF16)
			require.NoError(t, err)
			ck, rec, err := safetensors.RecordTensors(ts)
			require.NoError(t, err)
			defer ck.Close()

			// each layer's bytes in the file
			prefix := map[config.Layout]string{config.LayoutKimiK3: "language_model."}[layout] + "model.layers."
			type span struct{ lo, hi int64 }
			spans := map[int]span{}
			for _, n := range ck.Names() {
				rest, ok := strings.CutPrefix(n, prefix)
				if !ok {
					continue
				}
				var i int
				_, err := fmt.Sscanf(rest, "%d.", &i)
				require.NoError(t, err, n)
				tt, _ := ck.Tensor(n)
				s, ok := spans[i]
				if !ok {
					s = span{tt.Offset, tt.Offset + tt.Size}
				}
				spans[i] = span{min(s.lo, tt.Offset), max(s.hi, tt.Offset+tt.Size)}
			}
			require.Len(t, spans, 12)
			require.Greater(t, spans[2].lo, spans[10].lo, "the file is not in name order: the test proves nothing")

			before := len(rec.Ranges())
			model, err := Load(cfg, ck)
			require.NoError(t, err)
			require.Len(t, model.Layers, 12)
			for i, l := range model.Layers {
				require.NotNil(t, l, "layer %d", i)
				assert.Equal(t, cfg.Kinds[i], l.Kind, "layer %d", i)
			}
			var order []int // the layers in the order their bytes were read
			lastLayer, end := -1, int64(0)
			for _, s := range spans {
				end = max(end, s.hi)
			}
			var after []int // the reads of what lies after the layers (the final norm, AttnRes read-out)
			for k, r := range rec.Ranges()[before:] {
				if r.Off >= end {
					after = append(after, k)
				}
				for i, s := range spans {
					if r.Off >= s.lo && r.Off < s.hi {
						lastLayer = k
						if len(order) == 0 || order[len(order)-1] != i {
							order = append(order, i)
						}
					}
				}
			}
			require.Len(t, order, 12, "layers read in %v: each once, in one run", order)
			require.NotEmpty(t, after, "nothing lies after the layers: the test proves nothing")
			for _, k := range after {
				assert.Greater(t, k, lastLayer, "read %d, past the layers in the file, came before the last layer's read %d", k, lastLayer)
			}
			for k := 1; k < len(order); k++ {
				assert.Less(t, spans[order[k-1]].lo, spans[order[k]].lo, "layer %d read after layer %d, which lies after it in the file (order %v)", order[k], order[k-1], order)
			}

			var specLayers []int
			for _, s := range Spec(cfg) {
				var i int
				if rest, ok := strings.CutPrefix(s.Name, "model.layers."); ok {
					_, err := fmt.Sscanf(rest, "%d.", &i)
					require.NoError(t, err)
					if len(specLayers) == 0 || specLayers[len(specLayers)-1] != i {
						specLayers = append(specLayers, i)
					}
				}
			}
			assert.Equal(t, []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, specLayers, "Spec's layer order")
		})
	}
}
