//go:build cgo && !js

package wgsl

import (
	"time"

	"github.com/cogentcore/webgpu/wgpu"
)

type submission = wgpu.SubmissionIndex

func (d *Device) submit(cmd *wgpu.CommandBuffer) submission { return d.q.Submit(cmd) }

// wait blocks until submission s is done. Poll(true, idx) gives up after
// exactly 5 s while work may still run (bug 5); if it took that long, fall
// back to a Poll(false) + sleep loop, which waits correctly.
func (d *Device) wait(s submission) {
	t0 := time.Now()
	d.raw.Poll(true, &wgpu.WrappedSubmissionIndex{Queue: d.q, SubmissionIndex: s})
	if time.Since(t0) < 4*time.Second {
		return
	}
	for sleep := 100 * time.Microsecond; !d.raw.Poll(false, nil); sleep = min(2*sleep, 5*time.Millisecond) {
		time.Sleep(sleep)
	}
}
