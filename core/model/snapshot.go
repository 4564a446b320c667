package model

import (
	"fmt"
)

// Snapshot is a sequence state copied to host memory in a layout shared by
// every backend: per layer its fixed tensors concatenated in order (a KDA
// layer's recurrent state S [H, dk, dv], then its conv tails Q, K, V, each
// [K−1, H·dk] oldest first) and its cache's rows (an MLA layer's latent
// cache, [Pos, kv_lora_rank + rope]). A snapshot taken on one backend
// restores on another (the GPU runner keeps the same layout on the
// device).
type Snapshot struct {
	Pos   int
	Fixed [][]float32 // per layer (nil: none)
	Cache [][]float32 // per layer (nil: no cache)
}

// Bytes is the memory the snapshot holds.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for i := range s.Fixed {
		n += 4 * int64(len(s.Fixed[i])+len(s.Cache[i]))
	}
	return n
}

// Snapshot copies the state.
func (s *State) Snapshot() *Snapshot {
	n := len(s.Layers)
	sn := &Snapshot{Pos: s.N, Fixed: make([][]float32, n), Cache: make([][]float32, n)}
	for i, fixed := range s.Layers {
		if len(fixed) > 0 {
			var b []float32
			for _, x := range fixed {
				b = append(b, x...)
			}
			sn.Fixed[i] = b
		}
		if c := s.Caches[i]; c != nil {
			b := make([]float32, 0, c.Len()*c.Width())
			for t := 0; t < c.Len(); t++ {
				b = append(b, c.Row(t)...)
			}
			sn.Cache[i] = b
		}
	}
	return sn
}

// RestoreSnapshot replaces the state with sn's; it fails (leaving the state as it
// was) when sn was taken from a model of another shape.
func (s *State) RestoreSnapshot(sn *Snapshot) error {
	if err := s.CheckSnapshot(sn); err != nil {
		return err
	}
	for i, fixed := range s.Layers {
		l := sn.Fixed[i]
		for _, x := range fixed {
			l = l[copy(x, l):]
		}
		if c := s.Caches[i]; c != nil {
			c.Truncate(0)
			c.Append(sn.Cache[i])
		}
	}
	s.N = sn.Pos
	return nil
}

// CheckSnapshot reports whether sn fits this state's layers.
func (s *State) CheckSnapshot(sn *Snapshot) error {
	if len(sn.Fixed) != len(s.Layers) || len(sn.Cache) != len(s.Layers) {
		return fmt.Errorf("snapshot has %d layers, the model %d", len(sn.Fixed), len(s.Layers))
	}
	if sn.Pos < 0 {
		return fmt.Errorf("snapshot position %d", sn.Pos)
	}
	for i, fixed := range s.Layers {
		want := 0
		for _, x := range fixed {
			want += len(x)
		}
		if len(sn.Fixed[i]) != want {
			return fmt.Errorf("snapshot layer %d holds %d fixed values, want %d", i, len(sn.Fixed[i]), want)
		}
		w := 0
		if c := s.Caches[i]; c != nil {
			w = c.Width()
		}
		if len(sn.Cache[i]) != sn.Pos*w {
			return fmt.Errorf("snapshot layer %d holds %d cache values, want %d tokens × %d", i, len(sn.Cache[i]), sn.Pos, w)
		}
	}
	return nil
}
