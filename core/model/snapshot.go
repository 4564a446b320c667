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
	sn := &Snapshot{Pos: s.Pos, Fixed: make([][]float32, len(s.KDA)), Cache: make([][]float32, len(s.KDA))}
	for i := range s.KDA {
		if k := s.KDA[i]; k != nil {
			b := make([]float32, 0, len(k.S)+len(k.ConvQ)+len(k.ConvK)+len(k.ConvV))
			sn.Fixed[i] = append(append(append(append(b, k.S...), k.ConvQ...), k.ConvK...), k.ConvV...)
		}
		if c := s.MLA[i]; c != nil {
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
	for i := range sn.Fixed {
		if k := s.KDA[i]; k != nil {
			l := sn.Fixed[i]
			n := copy(k.S, l)
			n += copy(k.ConvQ, l[n:])
			n += copy(k.ConvK, l[n:])
			copy(k.ConvV, l[n:])
		}
		if c := s.MLA[i]; c != nil {
			c.Truncate(0)
			c.Append(sn.Cache[i])
		}
	}
	s.Pos = sn.Pos
	return nil
}

// CheckSnapshot reports whether sn fits this state's layers.
func (s *State) CheckSnapshot(sn *Snapshot) error {
	if len(sn.Fixed) != len(s.KDA) || len(sn.Cache) != len(s.KDA) {
		return fmt.Errorf("snapshot has %d layers, the model %d", len(sn.Fixed), len(s.KDA))
	}
	if sn.Pos < 0 {
		return fmt.Errorf("snapshot position %d", sn.Pos)
	}
	for i := range sn.Fixed {
		want := 0
		if k := s.KDA[i]; k != nil {
			want = len(k.S) + len(k.ConvQ) + len(k.ConvK) + len(k.ConvV)
		}
		if len(sn.Fixed[i]) != want {
			return fmt.Errorf("snapshot layer %d holds %d fixed values, want %d", i, len(sn.Fixed[i]), want)
		}
		w := 0
		if c := s.MLA[i]; c != nil {
			w = c.Width()
		}
		if len(sn.Cache[i]) != sn.Pos*w {
			return fmt.Errorf("snapshot layer %d holds %d cache values, want %d tokens × %d", i, len(sn.Cache[i]), sn.Pos, w)
		}
	}
	return nil
}
