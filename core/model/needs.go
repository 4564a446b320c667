package model

import (
	"sort"
	"strings"

	"github.com/tessera-llm/tessera/core/bind"
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Needs is what running a checkpoint takes, read from its header alone:
// what to download, to hold and to read per token.
type Needs struct {
	Stats // the configuration's parameter counts, state and cache sizes
	// Weights is the bytes of the tensors the text model binds: what a
	// text-only session downloads and holds.
	Weights int64
	// Vision is the bytes of the vision tower and projector, read on the
	// first image (0 without a vision_config).
	Vision int64
	// Decode is the weight bytes read to decode one token, by the type
	// they are multiplied in: every bound tensor whole, but one row of the
	// embedding table (all of it when it is the tied output head too) and
	// top-k of n of each layer's routed experts.
	Decode map[tensor.DType]int64
}

// DecodeBytes is the weight bytes read per decoded token, all types.
func (n Needs) DecodeBytes() int64 {
	var s int64
	for _, b := range n.Decode {
		s += b
	}
	return s
}

// DecodeTypes lists the types of Decode, most bytes first.
func (n Needs) DecodeTypes() []tensor.DType {
	ts := make([]tensor.DType, 0, len(n.Decode))
	for t := range n.Decode {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if n.Decode[ts[i]] != n.Decode[ts[j]] {
			return n.Decode[ts[i]] > n.Decode[ts[j]]
		}
		return ts[i] < ts[j]
	})
	return ts
}

// Memory is the memory the text model takes at a context of ctx tokens:
// its weights, the KDA state and the MLA cache for ctx tokens (float32).
func (n Needs) Memory(ctx int64) int64 {
	return n.Weights + n.KDAStateBytes + ctx*n.CacheBytesPerTok
}

// CheckHeader makes every check Load makes that ck's header can answer —
// each tensor cfg needs present, with its shape and a dtype it can bind,
// no tensor it does not use, the vision tower's when cfg has one — reading
// no tensor data, and returns what the model needs. A browser asks it
// before downloading the weights.
func CheckHeader(cfg *config.Config, ck *safetensors.Checkpoint) (Needs, error) {
	b := newBinder(cfg, ck)
	b.HeaderOnly = true
	b.model(&Model{Cfg: cfg})
	if b.Err != nil {
		return Needs{}, b.Err
	}
	if _, err := b.finish(cfg); err != nil {
		return Needs{}, err
	}
	n := Needs{Stats: ComputeStats(cfg), Decode: map[tensor.DType]int64{}}
	for _, name := range ck.Names() {
		t, _ := ck.Tensor(name)
		switch {
		case b.Used[name]:
			n.Weights += t.Size
			n.Decode[decodeType(t)] += decodeShare(cfg, b.Prefix, name, t)
		case ignorable(name) && cfg.Vision != nil:
			n.Vision += t.Size
		}
	}
	return n, nil
}

// decodeType is the type t is multiplied in: its bound matrix type
// (bind.MatDType), MXFP4 for the U8 pair of a compressed-tensors MXFP4
// matrix; F32 for anything else (vectors are read as float32).
func decodeType(t *safetensors.Tensor) tensor.DType {
	if dt, ok := bind.MatDType(t.DType); ok {
		return dt
	}
	if strings.HasSuffix(t.Name, "_packed") || strings.HasSuffix(t.Name, "_scale") {
		return tensor.MXFP4
	}
	return tensor.F32
}

// decodeShare is the bytes of t read to decode one token: one row of the
// embedding table unless it is also the output head, topK/numExperts of a
// routed expert's tensors (each token reads k of them), all of the rest.
func decodeShare(cfg *config.Config, prefix, name string, t *safetensors.Tensor) int64 {
	rest := strings.TrimPrefix(name, prefix)
	switch {
	case rest == "model.embed_tokens.weight" && !cfg.TieWordEmbed && len(t.Shape) > 0 && t.Shape[0] > 0:
		return t.Size / int64(t.Shape[0])
	case strings.Contains(rest, ".experts.") && cfg.NumExperts > 0:
		return t.Size * int64(cfg.TopK) / int64(cfg.NumExperts)
	}
	return t.Size
}
