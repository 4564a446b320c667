//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"
)

// Op wrappers of kda_gate.wgsl.

// KDAGate records the KDA log-decay gate (ref.KDAGate) for T tokens: g, raw
// [T, H·dk], dtBias [H·dk], aLog [H] or [H·dk] (perChannel). g may equal raw.
func (d *Device) KDAGate(g, raw, dtBias, aLog View, T, H, dk int, perChannel, bounded bool, lowerBound float32) error {
	n := T * H * dk
	if n <= 0 {
		return fmt.Errorf("wgsl: KDAGate: T %d, H %d, dk %d", T, H, dk)
	}
	nA := H
	if perChannel {
		nA = H * dk
	}
	for _, c := range []struct {
		v     View
		words int
		name  string
	}{{g, n, "g"}, {raw, n, "raw"}, {dtBias, H * dk, "dt_bias"}, {aLog, nA, "A_log"}} {
		if err := c.v.check(c.words, "KDAGate", c.name); err != nil {
			return err
		}
	}
	k, err := d.kernel("kda_gate.wgsl", "main", 4)
	if err != nil {
		return err
	}
	p := params{}.u(n, H*dk, dk, b2i(perChannel), b2i(bounded)).f(lowerBound).u(raw.Off, dtBias.Off, aLog.Off, g.Off)
	return d.dispatch(k, p, []*Buffer{raw.Buf, dtBias.Buf, aLog.Buf, g.Buf}, (n+255)/256)
}
