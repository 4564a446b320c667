package model

import (
	"github.com/tessera-llm/tessera/core/cpu"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
)

// State is the CPU sequence state (nn.State): per layer the fixed tensors
// its family asked for (for K3's KDA layers the recurrent state
// S [H, dk, dv] and the three conv tails) and its cache (K3's MLA latent
// cache), and the number of tokens seen. The fixed part has a fixed size
// whatever the context length.
type State struct {
	N      int
	Layers [][][]float32      // per layer its fixed tensors (nil for none)
	Caches []*ref.LatentCache // per layer (nil for none)

	handles [][]nn.Tensor // Layers as tensors (Fixed)
}

// cachePage is the number of tokens per latent-cache page.
const cachePage = 256

// NewState returns the empty state of a fresh sequence.
func (m *Model) NewState() *State { return NewState(m.StateSpec()) }

// NewState returns the empty state for spec.
func NewState(spec []nn.LayerState) *State {
	st := &State{Layers: make([][][]float32, len(spec)), Caches: make([]*ref.LatentCache, len(spec))}
	for i, l := range spec {
		for _, n := range l.Fixed {
			st.Layers[i] = append(st.Layers[i], make([]float32, n))
		}
		if l.CacheWidth > 0 {
			st.Caches[i] = ref.NewLatentCache(l.CacheWidth, cachePage)
		}
	}
	return st
}

// Pos is the number of tokens of the sequence so far.
func (s *State) Pos() int { return s.N }

// Advance moves the position on by n tokens.
func (s *State) Advance(n int) { s.N += n }

// Fixed is layer's i-th fixed tensor.
func (s *State) Fixed(layer, i int) nn.Tensor {
	if s.handles == nil {
		s.handles = make([][]nn.Tensor, len(s.Layers))
		for l, f := range s.Layers {
			for _, x := range f {
				s.handles[l] = append(s.handles[l], cpu.Vec(x))
			}
		}
	}
	return s.handles[layer][i]
}

// Cache is layer's cache (nil if it has none).
func (s *State) Cache(layer int) nn.Cache {
	if c := s.Caches[layer]; c != nil {
		return c
	}
	return nil
}

// Clone returns an independent copy (for prefix reuse: clone after a shared
// prompt, then continue each copy separately).
func (s *State) Clone() *State {
	d := &State{N: s.N, Layers: make([][][]float32, len(s.Layers)), Caches: make([]*ref.LatentCache, len(s.Caches))}
	for i, f := range s.Layers {
		for _, x := range f {
			d.Layers[i] = append(d.Layers[i], append([]float32(nil), x...))
		}
	}
	for i, c := range s.Caches {
		if c != nil {
			d.Caches[i] = c.Clone()
		}
	}
	return d
}

// Reset empties the state for a new sequence, keeping its memory.
func (s *State) Reset() error {
	s.N = 0
	for _, f := range s.Layers {
		for _, x := range f {
			clear(x)
		}
	}
	for _, c := range s.Caches {
		if c != nil {
			c.Truncate(0)
		}
	}
	return nil
}

// Reserve pre-allocates cache pages for n tokens so that decoding up to n
// allocates nothing.
func (s *State) Reserve(n int) {
	for _, c := range s.Caches {
		if c != nil {
			c.Reserve(n)
		}
	}
}

// Bytes is the memory held by the state: fixed tensors plus allocated
// cache pages.
func (s *State) Bytes() int64 {
	var n int64
	for _, f := range s.Layers {
		for _, x := range f {
			n += 4 * int64(len(x))
		}
	}
	for _, c := range s.Caches {
		if c != nil {
			n += c.Bytes()
		}
	}
	return n
}
