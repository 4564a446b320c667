package model

import (
	"fmt"
)

// Snapshot is a sequence state copied to host memory in a layout shared by
// every backend: per layer, a KDA layer's recurrent state S [H, dk, dv]
// followed by its conv tails Q, K, V ([K−1, H·dk] each, oldest first), or
// an MLA layer's latent cache rows [Pos, kv_lora_rank + rope]. A snapshot
// taken on one backend restores on another (the GPU runner keeps the same
// layout on the device).
type Snapshot struct {
	Pos int
	// Layers[i] is layer i's state as described above.
	Layers [][]float32
}

// Bytes is the memory the snapshot holds.
func (s *Snapshot) Bytes() int64 {
	var n int64
	for _, l := range s.Layers {
		n += 4 * int64(len(l))
	}
	return n
}

// Snapshot copies the state.
func (s *State) Snapshot() *Snapshot {
	sn := &Snapshot{Pos: s.Pos, Layers: make([][]float32, len(s.KDA))}
	for i := range s.KDA {
		if k := s.KDA[i]; k != nil {
			b := make([]float32, 0, len(k.S)+len(k.ConvQ)+len(k.ConvK)+len(k.ConvV))
			b = append(append(append(append(b, k.S...), k.ConvQ...), k.ConvK...), k.ConvV...)
			sn.Layers[i] = b
			continue
		}
		c := s.MLA[i]
		b := make([]float32, 0, c.Len()*c.Width())
		for t := 0; t < c.Len(); t++ {
			b = append(b, c.Row(t)...)
		}
		sn.Layers[i] = b
	}
	return sn
}

// Restore replaces the state with sn's; it fails (leaving the state as it
// was) when sn was taken from a model of another shape.
func (s *State) Restore(sn *Snapshot) error {
	if err := s.CheckSnapshot(sn); err != nil {
		return err
	}
	for i, l := range sn.Layers {
		if k := s.KDA[i]; k != nil {
			n := copy(k.S, l)
			n += copy(k.ConvQ, l[n:])
			n += copy(k.ConvK, l[n:])
			copy(k.ConvV, l[n:])
			continue
		}
		s.MLA[i].Truncate(0)
		s.MLA[i].Append(l)
	}
	s.Pos = sn.Pos
	return nil
}

// CheckSnapshot reports whether sn fits this state's layers.
func (s *State) CheckSnapshot(sn *Snapshot) error {
	if len(sn.Layers) != len(s.KDA) {
		return fmt.Errorf("snapshot has %d layers, the model %d", len(sn.Layers), len(s.KDA))
	}
	if sn.Pos < 0 {
		return fmt.Errorf("snapshot position %d", sn.Pos)
	}
	for i, l := range sn.Layers {
		if k := s.KDA[i]; k != nil {
			if want := len(k.S) + len(k.ConvQ) + len(k.ConvK) + len(k.ConvV); len(l) != want {
				return fmt.Errorf("snapshot layer %d (KDA) holds %d values, want %d", i, len(l), want)
			}
			continue
		}
		if w := s.MLA[i].Width(); len(l) != sn.Pos*w {
			return fmt.Errorf("snapshot layer %d (MLA) holds %d values, want %d tokens × %d", i, len(l), sn.Pos, w)
		}
	}
	return nil
}
