//go:build cgo && !js

package wgsl

import (
	"fmt"
	"runtime/debug"
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

// mapper holds the staging buffer's map callback (made once) and what it
// saw.
type mapper struct {
	cb     func(wgpu.BufferMapAsyncStatus)
	done   bool
	status wgpu.BufferMapAsyncStatus
}

func (m *mapper) init()    { m.cb = func(s wgpu.BufferMapAsyncStatus) { m.status, m.done = s, true } }
func (m *mapper) release() {}

// readStaging maps the first size bytes of the staging buffer, copies
// them to dst and unmaps it. It follows the portable GC-off pattern
// (binding bug 3): under gcMu, GC is switched off for the short window
// between MapAsync and its callback, because the binding keeps the
// callback's cgo handle only in an unreferenced Go heap cell.
func (d *Device) readStaging(size uint64, dst []byte) error {
	m := &d.mapper
	gcMu.Lock()
	old := debug.SetGCPercent(-1)
	m.done, m.status = false, 0
	err := d.staging.MapAsync(wgpu.MapModeRead, 0, size, m.cb)
	for i := 0; err == nil && !m.done && i < 100000; i++ {
		d.raw.Poll(true, nil) // the callback runs in here
	}
	debug.SetGCPercent(old)
	gcMu.Unlock()
	if err != nil {
		return fmt.Errorf("wgsl: map staging: %w", err)
	}
	if !m.done || m.status != wgpu.BufferMapAsyncStatusSuccess {
		return fmt.Errorf("wgsl: map staging: done=%v status=%v", m.done, m.status)
	}
	copy(dst, d.staging.GetMappedRange(0, uint(size))) // a view of the mapping: copy before Unmap
	if err := d.staging.Unmap(); err != nil {
		return fmt.Errorf("wgsl: unmap staging: %w", err)
	}
	return nil
}
