//go:build cgo && !js

package wgsl

import (
	"time"

	"github.com/cogentcore/webgpu/wgpu"
)

type submission = wgpu.SubmissionIndex

func (d *Device) submit(cmd *wgpu.CommandBuffer) submission { return d.q.Submit(cmd) }

// wait blocks until submission s is done. Poll(true, idx) gives up after
// exactly 5 s while work may still run, and wgpu-core then recycles
// resources the GPU still uses (bug 5: a later SIGSEGV in lavapipe), so a
// submission that may take seconds must be waited for with a Poll(false) +
// sleep loop instead (≈ 1 ms more latency). That loop is used while a
// long-context runner holds the device (longWaits > 0: one decode step
// over a 1 M-token cache takes seconds on a CPU driver), after bulk
// transfers (more than bulkWaitBytes created or written since the last
// wait: a model upload), and for good once a blocking wait has taken
// slowWait (a device this slow — a CPU driver on a loaded machine, a
// large model — may take 5 s over a later step). Short steps keep the
// blocking wait (≈ 1 ms less latency per token than polling with sleeps).
func (d *Device) wait(s submission) {
	bulk := d.bulkBytes
	d.bulkBytes = 0
	if d.longWaits > 0 || d.slow || bulk > bulkWaitBytes {
		d.pollLoop()
		return
	}
	t0 := time.Now()
	d.raw.Poll(true, &wgpu.WrappedSubmissionIndex{Queue: d.q, SubmissionIndex: s})
	if el := time.Since(t0); el >= slowWait {
		d.slow = true
		if el >= 4*time.Second {
			d.pollLoop()
		}
	}
}

// slowWait is the blocking wait from which a device polls from then on.
const slowWait = time.Second

// bulkWaitBytes is the transfer volume from which wait polls.
const bulkWaitBytes = 64 << 20

// pollLoop polls without blocking until the queue is empty.
func (d *Device) pollLoop() {
	for sleep := 50 * time.Microsecond; !d.raw.Poll(false, nil); sleep = min(2*sleep, 2*time.Millisecond) {
		time.Sleep(sleep)
	}
}

// writeQueue is queue.writeBuffer(b, off, p) (the browser build stages it
// through a JavaScript array; see submit_js.go).
func (d *Device) writeQueue(b *wgpu.Buffer, off uint64, p []byte) error {
	return d.q.WriteBuffer(b, off, p)
}

// stageBuf is empty natively (submit_js.go).
type stageBuf struct{}
