//go:build cgo || js

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/model"
)

// Snapshot reads the sequence state back to the host in model.Snapshot's
// layout (the device keeps KDA state and conv tails in that order; MLA
// caches are read page by page up to Len rows).
func (r *Runner) Snapshot() (*model.Snapshot, error) {
	sn := &model.Snapshot{Pos: r.pos, Layers: make([][]float32, len(r.layers))}
	for i, l := range r.layers {
		switch {
		case l.kda != nil:
			b := make([]float32, l.kda.state.Words())
			if err := r.d.ReadF32(l.kda.state.At(0), b); err != nil {
				return nil, fmt.Errorf("wgsl: snapshot layer %d: %w", i, err)
			}
			sn.Layers[i] = b
		case l.mla != nil:
			c := l.mla.cache
			b := make([]float32, c.Len*c.Width)
			for _, s := range c.spans(0, c.Len) {
				if err := r.d.ReadF32(s.page.At(s.local*c.Width), b[s.row*c.Width:(s.row+s.n)*c.Width]); err != nil {
					return nil, fmt.Errorf("wgsl: snapshot layer %d: %w", i, err)
				}
			}
			sn.Layers[i] = b
		}
	}
	return sn, nil
}

// Restore uploads sn (from Snapshot, or model.State.Snapshot on the CPU)
// as the sequence state.
func (r *Runner) Restore(sn *model.Snapshot) error {
	if len(sn.Layers) != len(r.layers) {
		return fmt.Errorf("wgsl: restore: snapshot has %d layers, the runner %d", len(sn.Layers), len(r.layers))
	}
	if sn.Pos < 0 || sn.Pos > r.opt.MaxContext {
		return fmt.Errorf("wgsl: restore: snapshot of %d tokens, the runner holds %d", sn.Pos, r.opt.MaxContext)
	}
	for i, l := range r.layers {
		switch {
		case l.kda != nil && len(sn.Layers[i]) != l.kda.state.Words():
			return fmt.Errorf("wgsl: restore: layer %d (KDA) has %d values, want %d", i, len(sn.Layers[i]), l.kda.state.Words())
		case l.mla != nil && len(sn.Layers[i]) != sn.Pos*l.mla.cache.Width:
			return fmt.Errorf("wgsl: restore: layer %d (MLA) has %d values, want %d × %d", i, len(sn.Layers[i]), sn.Pos, l.mla.cache.Width)
		}
	}
	if err := r.Reset(); err != nil {
		return err
	}
	for i, l := range r.layers {
		var err error
		switch {
		case l.kda != nil:
			err = l.kda.state.WriteF32(0, sn.Layers[i])
		case l.mla != nil:
			err = l.mla.cache.AppendHost(sn.Layers[i])
		}
		if err != nil {
			return fmt.Errorf("wgsl: restore layer %d: %w", i, err)
		}
	}
	r.pos = sn.Pos
	return nil
}
