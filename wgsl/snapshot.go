//go:build cgo || js

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/model"
)

// SnapshotState reads the sequence state back to the host in model.Snapshot's
// layout (the device keeps a KDA layer's state and conv tails in that
// order in one buffer; MLA caches are read page by page up to Len rows).
func (r *Runner) SnapshotState() (*model.Snapshot, error) {
	sn := &model.Snapshot{Pos: r.pos, Fixed: make([][]float32, len(r.layers)), Cache: make([][]float32, len(r.layers))}
	for i, l := range r.layers {
		if l.kda != nil {
			b := make([]float32, l.kda.state.Words())
			if err := r.d.ReadF32(l.kda.state.At(0), b); err != nil {
				return nil, fmt.Errorf("wgsl: snapshot layer %d: %w", i, err)
			}
			sn.Fixed[i] = b
		}
		if l.mla != nil {
			c := l.mla.cache
			b := make([]float32, c.Len*c.Width)
			for _, s := range c.spans(0, c.Len) {
				if err := r.d.ReadF32(s.page.At(s.local*c.Width), b[s.row*c.Width:(s.row+s.n)*c.Width]); err != nil {
					return nil, fmt.Errorf("wgsl: snapshot layer %d: %w", i, err)
				}
			}
			sn.Cache[i] = b
		}
	}
	return sn, nil
}

// RestoreState uploads sn (from SnapshotState, or model.State.Snapshot on the CPU)
// as the sequence state.
func (r *Runner) RestoreState(sn *model.Snapshot) error {
	if len(sn.Fixed) != len(r.layers) || len(sn.Cache) != len(r.layers) {
		return fmt.Errorf("wgsl: restore: snapshot has %d layers, the runner %d", len(sn.Fixed), len(r.layers))
	}
	if sn.Pos < 0 || sn.Pos > r.opt.MaxContext {
		return fmt.Errorf("wgsl: restore: snapshot of %d tokens, the runner holds %d", sn.Pos, r.opt.MaxContext)
	}
	for i, l := range r.layers {
		fixed, width := 0, 0
		if l.kda != nil {
			fixed = l.kda.state.Words()
		}
		if l.mla != nil {
			width = l.mla.cache.Width
		}
		if len(sn.Fixed[i]) != fixed || len(sn.Cache[i]) != sn.Pos*width {
			return fmt.Errorf("wgsl: restore: layer %d has %d fixed and %d cache values, want %d and %d × %d",
				i, len(sn.Fixed[i]), len(sn.Cache[i]), fixed, sn.Pos, width)
		}
	}
	if err := r.Reset(); err != nil {
		return err
	}
	for i, l := range r.layers {
		if l.kda != nil {
			if err := l.kda.state.WriteF32(0, sn.Fixed[i]); err != nil {
				return fmt.Errorf("wgsl: restore layer %d: %w", i, err)
			}
		}
		if l.mla != nil {
			if err := l.mla.cache.AppendHost(sn.Cache[i]); err != nil {
				return fmt.Errorf("wgsl: restore layer %d: %w", i, err)
			}
		}
	}
	r.pos = sn.Pos
	return nil
}
