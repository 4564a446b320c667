package safetensors

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
)

// Source is a random-access byte source: a file, a memory map, or bytes
// fetched by a browser. ReadAt must be safe for concurrent use.
//
// A Source that also implements interface{ Bytes() []byte } exposes its whole
// content in memory; Checkpoint.Bytes then returns sub-slices without
// copying. A Source that implements io.Closer is closed by Checkpoint.Close.
type Source interface {
	io.ReaderAt
	// Size returns the total number of bytes in the source.
	Size() int64
}

// byteser is implemented by sources whose content is addressable memory.
type byteser interface {
	Bytes() []byte
}

// bytesSource is an in-memory Source.
type bytesSource struct{ b []byte }

// BytesSource returns a Source over b. The Source does not copy b; b must
// not be modified while the Source is in use.
func BytesSource(b []byte) Source { return &bytesSource{b: b} }

func (s *bytesSource) Size() int64   { return int64(len(s.b)) }
func (s *bytesSource) Bytes() []byte { return s.b }

func (s *bytesSource) ReadAt(p []byte, off int64) (int, error) {
	return readAtBytes(s.b, p, off)
}

// readAtBytes implements io.ReaderAt semantics over an in-memory buffer.
func readAtBytes(b, p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, fmt.Errorf("safetensors: negative read offset %d", off)
	}
	if off >= int64(len(b)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	n := copy(p, b[off:])
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// fileSource is a Source reading an *os.File with ReadAt (no mapping).
type fileSource struct {
	f    *os.File
	size int64
}

func (s *fileSource) ReadAt(p []byte, off int64) (int, error) { return s.f.ReadAt(p, off) }
func (s *fileSource) Size() int64                             { return s.size }
func (s *fileSource) Close() error                            { return s.f.Close() }

// OpenFile opens the file at path as a Source. On Unix systems the file is
// memory-mapped read-only (so the Source implements Bytes() and
// Checkpoint.Bytes is zero-copy); elsewhere, including GOOS=js, and when
// mapping fails, it is read with ReadAt. The returned Source implements
// io.Closer; close it when done. The file must not be truncated while
// mapped.
func OpenFile(path string) (Source, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st.IsDir() {
		f.Close()
		return nil, fmt.Errorf("safetensors: %s is a directory, not a file", path)
	}
	if !st.Mode().IsRegular() {
		// Pipes and devices cannot be mapped and may not support ReadAt.
		f.Close()
		return nil, fmt.Errorf("safetensors: %s is not a regular file", path)
	}
	if src, ok := mapFile(f, st.Size()); ok {
		f.Close() // the mapping stays valid after the descriptor is closed
		return src, nil
	}
	return &fileSource{f: f, size: st.Size()}, nil
}

// DirOpener returns an Opener that opens files below dir with OpenFile.
// Names must be slash-separated relative paths that stay inside dir
// (fs.ValidPath); a missing file gives an error wrapping fs.ErrNotExist.
func DirOpener(dir string) Opener {
	return func(name string) (Source, error) {
		if !fs.ValidPath(name) {
			return nil, fmt.Errorf("safetensors: invalid file name %q: must be a relative path inside the model directory", name)
		}
		return OpenFile(filepath.Join(dir, filepath.FromSlash(name)))
	}
}

// MemOpener returns an Opener over in-memory files keyed by name, e.g. bytes
// a browser fetched. A missing name gives an error wrapping fs.ErrNotExist.
func MemOpener(files map[string][]byte) Opener {
	return func(name string) (Source, error) {
		b, ok := files[name]
		if !ok {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return BytesSource(b), nil
	}
}
