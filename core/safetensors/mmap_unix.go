//go:build unix

package safetensors

import (
	"errors"
	"math"
	"os"
	"sync"
	"syscall"
)

// mmapSource is a read-only memory map of a whole file.
type mmapSource struct {
	mu   sync.RWMutex
	data []byte
}

// mapFile maps f read-only. It reports false when the file cannot be
// mapped (empty, too large for the address space, or mmap failure), in which
// case the caller falls back to ReadAt.
func mapFile(f *os.File, size int64) (Source, bool) {
	if size <= 0 || uint64(size) > math.MaxInt {
		return nil, false
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, false
	}
	return &mmapSource{data: data}, true
}

func (m *mmapSource) ReadAt(p []byte, off int64) (int, error) {
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.data == nil {
		return 0, os.ErrClosed
	}
	return readAtBytes(m.data, p, off)
}

func (m *mmapSource) Size() int64 {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return int64(len(m.data))
}

// Bytes returns the mapped memory (read-only: writing to it faults), or nil
// after Close.
func (m *mmapSource) Bytes() []byte {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.data
}

// Close unmaps the file. Slices obtained from Bytes become invalid.
func (m *mmapSource) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.data == nil {
		return errors.New("safetensors: memory map already closed")
	}
	err := syscall.Munmap(m.data)
	m.data = nil
	return err
}
