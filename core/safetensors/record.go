package safetensors

import (
	"bytes"
	"io"
	"io/fs"
	"sync"
)

// Range is the byte range [Off, Off+N) of one read.
type Range struct{ Off, N int64 }

// Recorder is a Source that reads through another and records the range
// of every ReadAt: what loading and using a model reads of a file (a
// text-only session reads none of the vision tower's tensors; a browser
// fetching ranges of a file on demand reads the same). It hides the
// wrapped Source's in-memory Bytes, so every tensor read goes through
// ReadAt (copied). Safe for concurrent use.
type Recorder struct {
	src    Source
	mu     sync.Mutex
	ranges []Range
}

// NewRecorder returns a Recorder reading src.
func NewRecorder(src Source) *Recorder { return &Recorder{src: src} }

// ReadAt reads src and records [off, off+len(p)).
func (r *Recorder) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	r.ranges = append(r.ranges, Range{off, int64(len(p))})
	r.mu.Unlock()
	return r.src.ReadAt(p, off)
}

// Size is src's size.
func (r *Recorder) Size() int64 { return r.src.Size() }

// Close closes src if it is an io.Closer.
func (r *Recorder) Close() error {
	if c, ok := r.src.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Ranges returns the reads recorded so far, in order.
func (r *Recorder) Ranges() []Range {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Range(nil), r.ranges...)
}

// Overlaps returns the recorded reads that share a byte with the data of
// t (a tensor of this Source's file).
func (r *Recorder) Overlaps(t *Tensor) []Range {
	var out []Range
	for _, g := range r.Ranges() {
		if g.N > 0 && t.Size > 0 && g.Off < t.Offset+t.Size && t.Offset < g.Off+g.N {
			out = append(out, g)
		}
	}
	return out
}

// RecordTensors writes tensors as one safetensors file in memory and opens
// it as a checkpoint read through a Recorder, which the caller inspects
// (what binding or using a model reads of it).
func RecordTensors(tensors []WriteTensor) (*Checkpoint, *Recorder, error) {
	var b bytes.Buffer
	if err := Write(&b, tensors, nil); err != nil {
		return nil, nil, err
	}
	rec := NewRecorder(BytesSource(b.Bytes()))
	ck, err := Open(func(name string) (Source, error) {
		if name != SingleFileName {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return rec, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return ck, rec, nil
}
