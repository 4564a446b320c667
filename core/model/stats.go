package model

import (
	"strings"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/vision"
)

// Stats are size figures of a configuration, derived from its tensor list.
type Stats struct {
	TotalParams  int64 // every weight
	ActiveParams int64 // weights used for one token: all but unselected routed experts (embedding counted whole)
	// DecodeReadParams are the weights read to decode one token: like
	// ActiveParams but only one embedding row.
	DecodeReadParams int64
	KDAStateBytes    int64 // all KDA / GDN layers: recurrent state + conv tails (fp32), constant in context
	CacheBytesPerTok int64 // all MLA / GQA layers: latent or K/V cache per token (fp32)
	VisionParams     int64 // vision tower + projector (included in TotalParams, not in ActiveParams)
}

// ComputeStats derives Stats for cfg.
func ComputeStats(cfg *config.Config) Stats {
	var s Stats
	expertParams := map[int]int64{} // per layer: params of one routed expert
	for _, t := range Spec(cfg) {
		n := int64(1)
		for _, d := range t.Shape {
			n *= int64(d)
		}
		s.TotalParams += n
		if strings.Contains(t.Name, ".experts.") {
			var layer int
			_, _ = sscanLayer(t.Name, &layer)
			expertParams[layer] += n
			continue
		}
		s.ActiveParams += n
		if strings.HasSuffix(t.Name, "embed_tokens.weight") {
			s.DecodeReadParams += int64(cfg.HiddenSize)
		} else {
			s.DecodeReadParams += n
		}
	}
	for _, n := range expertParams {
		per := n / int64(cfg.NumExperts)
		s.ActiveParams += per * int64(cfg.TopK)
		s.DecodeReadParams += per * int64(cfg.TopK)
	}
	if cfg.Vision != nil {
		if vc, err := vision.ParseConfig(cfg.Vision, cfg.HiddenSize); err == nil {
			for _, t := range vision.Spec(vc) {
				n := int64(1)
				for _, d := range t.Shape {
					n *= int64(d)
				}
				s.VisionParams += n
			}
			s.TotalParams += s.VisionParams
		}
	}
	for _, k := range cfg.Kinds {
		switch k {
		case config.KDA:
			hd := int64(cfg.KDAHeads * cfg.KDAHeadDim)
			s.KDAStateBytes += 4 * (hd*int64(cfg.KDAHeadDim) + 3*int64(cfg.ConvKernel-1)*hd)
		case config.GDN:
			kd, vd := int64(cfg.LinearKeyHeads*cfg.LinearKeyHeadDim), int64(cfg.LinearValueHeads*cfg.LinearValueHeadDim)
			s.KDAStateBytes += 4 * (vd*int64(cfg.LinearKeyHeadDim) + int64(cfg.ConvKernel-1)*(2*kd+vd))
		case config.GQA:
			s.CacheBytesPerTok += 4 * int64(2*cfg.NumKVHeads*cfg.HeadDim)
		default:
			s.CacheBytesPerTok += 4 * int64(cfg.KVLoraRank+cfg.QKRopeHeadDim)
		}
	}
	return s
}

// sscanLayer reads i from a "model.layers.{i}." name.
func sscanLayer(name string, i *int) (int, error) {
	const p = "model.layers."
	k := strings.Index(name, p)
	if k < 0 {
		return 0, nil
	}
	n := 0
	for _, ch := range name[k+len(p):] {
		if ch < '0' || ch > '9' {
			break
		}
		n = n*10 + int(ch-'0')
	}
	*i = n
	return 1, nil
}
