package atomicfile

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWrite(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "out.bin")
	require.NoError(t, WriteBytes(path, 0o640, []byte("first")))
	st, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), st.Mode().Perm())

	// A failing writer leaves the old content and no temporary file.
	boom := errors.New("boom")
	err = Write(path, 0o644, func(w io.Writer) error {
		w.Write([]byte("half"))
		return boom
	})
	require.ErrorIs(t, err, boom)
	got, err := os.ReadFile(path)
	require.NoError(t, err)
	require.Equal(t, "first", string(got))
	left, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Len(t, left, 1, "temporary files left: %v", left)

	require.NoError(t, WriteBytes(path, 0o644, []byte("second")))
	got, _ = os.ReadFile(path)
	require.Equal(t, "second", string(got))

	missing := filepath.Join(dir, "nope", "x.bin")
	err = WriteBytes(missing, 0o644, nil)
	require.ErrorContains(t, err, "directory "+filepath.Join(dir, "nope"))
	require.ErrorIs(t, err, os.ErrNotExist)
}
