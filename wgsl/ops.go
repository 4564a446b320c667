//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
)

// loopBudget is the number of loop iterations one invocation may run:
// lavapipe silently stops an invocation after about 65,535 (webgpu.md §5c).
// Wrappers split work so kernels stay well below it.
const loopBudget = 32768

func rowsWords(rows, n, stride int) int {
	if rows <= 0 {
		return 0
	}
	return (rows-1)*stride + n
}

// Strided is a View whose rows are Stride words apart.
type Strided struct {
	View
	Stride int
}

// Rows returns v as a Strided view with rows stride words apart.
func (v View) Rows(stride int) Strided { return Strided{v, stride} }

func (s Strided) check(rows, n int, what string, part ...string) error {
	if s.Stride < n {
		return fmt.Errorf("wgsl: %s: row stride %d < row length %d", joinWhat(what, part), s.Stride, n)
	}
	return s.View.check(rowsWords(rows, n, s.Stride), what, part...)
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// dispatchXY is dispatch with an explicit 2-D grid (gx ≤ 65535, gy ≤ 65535).
func (d *Device) dispatchXY(k *kernel, p params, bufs []*Buffer, gx, gy int) error {
	if gx > maxGroups || gy > maxGroups {
		return fmt.Errorf("wgsl: %s: grid %dx%d", k.name, gx, gy)
	}
	return d.dispatchGrid(k, p, bufs, uint32(gx), uint32(gy))
}

// maxBindingWords is the WebGPU default maxStorageBufferBindingSize
// (128 MiB) in words: every storage binding covers its whole buffer, so no
// buffer may be larger.
const maxBindingWords = 128 << 20 / 4
