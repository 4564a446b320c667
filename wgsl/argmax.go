//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
)

// Op wrappers of argmax.wgsl.

// Argmax records out[0] = the index (u32) of the largest of the n floats
// at x, the first on ties (generate.Argmax), so greedy decoding reads back
// one word per token.
func (d *Device) Argmax(out, x View, n int) error {
	if n <= 0 {
		return fmt.Errorf("wgsl: Argmax of %d values", n)
	}
	if err := x.check(n, "Argmax x"); err != nil {
		return err
	}
	if err := out.check(1, "Argmax out"); err != nil {
		return err
	}
	if n/256 > loopBudget {
		return fmt.Errorf("wgsl: Argmax: %d values exceed the per-invocation loop budget", n)
	}
	k, err := d.kernel("argmax.wgsl", "main", 2)
	if err != nil {
		return err
	}
	return d.dispatch(k, params{}.u(n, x.Off, out.Off), []*Buffer{x.Buf, out.Buf}, 1)
}
