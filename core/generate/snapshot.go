package generate

import (
	"errors"
	"fmt"

	"github.com/tessera-llm/tessera/core/model"
)

// Snapshotter is a Backend whose sequence state can be copied to the host
// and put back (prefix caching, saved conversations): the CPU backend and
// wgsl.Runner.
type Snapshotter interface {
	SnapshotState() (*model.Snapshot, error)
	RestoreState(*model.Snapshot) error
}

func (b *cpuBackend) SnapshotState() (*model.Snapshot, error) { return b.st.Snapshot(), nil }
func (b *cpuBackend) RestoreState(sn *model.Snapshot) error   { return b.st.RestoreSnapshot(sn) }

// ErrNoSnapshot reports a backend that cannot snapshot its state.
var ErrNoSnapshot = errors.New("this backend cannot snapshot its sequence state")

// Snapshot copies the sequence state; the history is History().
func (s *Session) Snapshot() (*model.Snapshot, error) {
	b, ok := s.B.(Snapshotter)
	if !ok {
		return nil, ErrNoSnapshot
	}
	return b.SnapshotState()
}

// RestoreSnapshot continues the sequence from sn, taken after history.
func (s *Session) RestoreSnapshot(sn *model.Snapshot, history []int) error {
	b, ok := s.B.(Snapshotter)
	if !ok {
		return ErrNoSnapshot
	}
	if sn.Pos != len(history) {
		return fmt.Errorf("restore: snapshot at position %d with %d history tokens", sn.Pos, len(history))
	}
	if err := b.RestoreState(sn); err != nil {
		return err
	}
	s.history = append(s.history[:0], history...)
	return nil
}
