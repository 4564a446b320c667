//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/model"
)

// fixedWords is the number of values of layer i's fixed tensors (one
// buffer, the tensors contiguous in order).
func (s *gpuState) fixedWords(i int) int {
	n := 0
	for _, t := range s.fixed[i] {
		n += t.(*gt).cols
	}
	return n
}

// SnapshotState reads the sequence state back to the host in
// model.Snapshot's layout (the device keeps a layer's fixed tensors in
// that order in one buffer; caches are read page by page up to Len rows).
func (r *Runner) SnapshotState() (*model.Snapshot, error) {
	s := r.st
	n := len(s.bufs)
	sn := &model.Snapshot{Pos: s.pos, Fixed: make([][]float32, n), Cache: make([][]float32, n)}
	for i, buf := range s.bufs {
		if buf != nil {
			b := make([]float32, s.fixedWords(i))
			if err := r.d.ReadF32(buf.At(0), b); err != nil {
				return nil, fmt.Errorf("wgsl: snapshot layer %d: %w", i, err)
			}
			sn.Fixed[i] = b
		}
		if c := s.caches[i]; c != nil {
			b := make([]float32, c.Len*c.Width)
			for sp := range c.spans(0, c.Len) {
				if err := r.d.ReadF32(sp.page.At(sp.local*c.Width), b[sp.row*c.Width:(sp.row+sp.n)*c.Width]); err != nil {
					return nil, fmt.Errorf("wgsl: snapshot layer %d: %w", i, err)
				}
			}
			sn.Cache[i] = b
		}
	}
	return sn, nil
}

// RestoreState uploads sn (from SnapshotState, or model.State.Snapshot on
// the CPU) as the sequence state.
func (r *Runner) RestoreState(sn *model.Snapshot) error {
	s := r.st
	r.live.fresh = false
	if len(sn.Fixed) != len(s.bufs) || len(sn.Cache) != len(s.bufs) {
		return fmt.Errorf("wgsl: restore: snapshot has %d layers, the runner %d", len(sn.Fixed), len(s.bufs))
	}
	if sn.Pos < 0 || sn.Pos > r.opt.MaxContext {
		return fmt.Errorf("wgsl: restore: snapshot of %d tokens, the runner holds %d", sn.Pos, r.opt.MaxContext)
	}
	for i := range s.bufs {
		fixed, width := 0, 0
		if s.bufs[i] != nil {
			fixed = s.fixedWords(i)
		}
		if c := s.caches[i]; c != nil {
			width = c.Width
		}
		if len(sn.Fixed[i]) != fixed || len(sn.Cache[i]) != sn.Pos*width {
			return fmt.Errorf("wgsl: restore: layer %d has %d fixed and %d cache values, want %d and %d × %d",
				i, len(sn.Fixed[i]), len(sn.Cache[i]), fixed, sn.Pos, width)
		}
	}
	if err := r.Reset(); err != nil {
		return err
	}
	for i, buf := range s.bufs {
		if buf != nil {
			if err := buf.WriteF32(0, sn.Fixed[i]); err != nil {
				return fmt.Errorf("wgsl: restore layer %d: %w", i, err)
			}
		}
		if c := s.caches[i]; c != nil {
			if err := c.AppendHost(sn.Cache[i]); err != nil {
				return fmt.Errorf("wgsl: restore layer %d: %w", i, err)
			}
		}
	}
	s.pos = sn.Pos
	return nil
}
