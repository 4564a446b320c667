//go:build amd64 && !linux && !purego

package ref

// amxPermit is false: the AMX kernels ask Linux alone for the tile data.
func amxPermit() bool { return false }
