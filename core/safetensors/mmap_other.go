//go:build !unix

package safetensors

import "os"

// mapFile reports false: memory mapping is only used on Unix systems, so
// files are read with ReadAt.
func mapFile(*os.File, int64) (Source, bool) { return nil, false }
