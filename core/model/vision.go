package model

import (
	"errors"
	"fmt"
	"sync"

	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/vision"
)

// lazyTower binds a model's vision tower from its checkpoint once, on
// first use.
type lazyTower struct {
	cfg  *vision.Config
	ck   *safetensors.Checkpoint
	once sync.Once
	t    *vision.Tower
	err  error
}

// HasVision reports whether the model takes images: its config has a
// vision_config and its checkpoint the vision tower's tensors (checked
// at load, read by VisionTower).
func (m *Model) HasVision() bool { return m.tower != nil }

// VisionTower returns the vision tower and projector, binding them from
// the checkpoint on the first call (vision.Load: the vectors copied, the
// matrices read or mapped), so a session that never sees an image reads
// none of the vision tensors' data. Load checked them from the header
// (vision.Check); the checkpoint must stay open until the first call.
// Safe for concurrent use: every call returns the same tower, or the same
// error. A model without vision (HasVision false) returns an error.
func (m *Model) VisionTower() (*vision.Tower, error) {
	l := m.tower
	if l == nil {
		return nil, errors.New("the model has no vision tower (no vision_config in config.json)")
	}
	l.once.Do(func() {
		if l.t, l.err = vision.Load(l.cfg, l.ck); l.err != nil {
			l.err = fmt.Errorf("reading the vision tower: %w", l.err)
		}
	})
	return l.t, l.err
}
