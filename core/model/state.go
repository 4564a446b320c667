package model

import (
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/ref"
)

// State is everything one sequence carries from token to token: per KDA
// layer the recurrent state S [H, dk, dv] and the three conv tails, per MLA
// layer the latent cache, and the number of tokens seen. The KDA part has
// a fixed size whatever the context length.
type State struct {
	Pos int
	KDA []*KDAState // per layer; nil for MLA layers
	MLA []*ref.LatentCache
}

// KDAState is one KDA layer's recurrent state and conv tails.
type KDAState struct {
	S                   []float32 // [H, dk, dv]
	ConvQ, ConvK, ConvV []float32 // [K−1, H·dk] pre-conv inputs, oldest first
}

// cachePage is the number of tokens per latent-cache page.
const cachePage = 256

// NewState returns the empty state of a fresh sequence.
func (m *Model) NewState() *State {
	c := m.Cfg
	st := &State{KDA: make([]*KDAState, len(m.Layers)), MLA: make([]*ref.LatentCache, len(m.Layers))}
	for i, l := range m.Layers {
		if l.Kind == config.KDA {
			hd := c.KDAHeads * c.KDAHeadDim
			tail := (c.ConvKernel - 1) * hd
			st.KDA[i] = &KDAState{
				S:     make([]float32, c.KDAHeads*c.KDAHeadDim*c.KDAHeadDim),
				ConvQ: make([]float32, tail), ConvK: make([]float32, tail), ConvV: make([]float32, tail),
			}
		} else {
			st.MLA[i] = ref.NewLatentCache(c.KVLoraRank+c.QKRopeHeadDim, cachePage)
		}
	}
	return st
}

// Clone returns an independent copy (for prefix reuse: clone after a shared
// prompt, then continue each copy separately).
func (s *State) Clone() *State {
	d := &State{Pos: s.Pos, KDA: make([]*KDAState, len(s.KDA)), MLA: make([]*ref.LatentCache, len(s.MLA))}
	cp := func(x []float32) []float32 { return append([]float32(nil), x...) }
	for i, k := range s.KDA {
		if k != nil {
			d.KDA[i] = &KDAState{S: cp(k.S), ConvQ: cp(k.ConvQ), ConvK: cp(k.ConvK), ConvV: cp(k.ConvV)}
		}
	}
	for i, c := range s.MLA {
		if c != nil {
			d.MLA[i] = c.Clone()
		}
	}
	return d
}

// Reset empties the state for a new sequence, keeping its memory.
func (s *State) Reset() {
	s.Pos = 0
	for _, k := range s.KDA {
		if k != nil {
			clear(k.S)
			clear(k.ConvQ)
			clear(k.ConvK)
			clear(k.ConvV)
		}
	}
	for _, c := range s.MLA {
		if c != nil {
			c.Truncate(0)
		}
	}
}

// Reserve pre-allocates latent-cache pages for n tokens so that decoding up
// to n allocates nothing.
func (s *State) Reserve(n int) {
	for _, c := range s.MLA {
		if c != nil {
			c.Reserve(n)
		}
	}
}

// Bytes is the memory held by the state: KDA states and conv tails plus
// allocated cache pages.
func (s *State) Bytes() int64 {
	var n int64
	for _, k := range s.KDA {
		if k != nil {
			n += 4 * int64(len(k.S)+len(k.ConvQ)+len(k.ConvK)+len(k.ConvV))
		}
	}
	for _, c := range s.MLA {
		if c != nil {
			n += c.Bytes()
		}
	}
	return n
}
