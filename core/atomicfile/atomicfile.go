// Package atomicfile writes a file so that readers see its old content or
// the whole new content, never part of it: the data goes to a temporary
// file in the same directory, which is synced and then renamed over the
// path. On any error the temporary file is removed and the path is left as
// it was.
package atomicfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Write creates or replaces path with mode perm and the bytes write
// writes. A missing or unwritable directory is reported by its name.
func Write(path string, perm os.FileMode, write func(io.Writer) error) (err error) {
	dir := filepath.Dir(path)
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".*.tmp")
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) { // name the directory, not the temporary file
			return fmt.Errorf("directory %s: %w", dir, pe.Err)
		}
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Chmod(perm); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// WriteBytes is Write of data.
func WriteBytes(path string, perm os.FileMode, data []byte) error {
	return Write(path, perm, func(w io.Writer) error {
		_, err := w.Write(data)
		return err
	})
}
