//go:build js && !cpuonly

package wgsl

import (
	"errors"
	"fmt"
	"syscall/js"
	"unsafe"

	"github.com/cogentcore/webgpu/wgpu"
)

type submission = struct{}

func (d *Device) submit(cmd *wgpu.CommandBuffer) submission {
	d.q.Submit(cmd)
	return submission{}
}

// wait is a no-op in the browser: MapAsync awaits the queue itself.
func (d *Device) wait(submission) {}

// writeQueue is queue.writeBuffer(b, off, p) through a staging Uint8Array
// the device keeps: cogentcore/webgpu's WriteBuffer builds a view on the
// wasm memory's ArrayBuffer and then calls into JavaScript, and when the
// Go heap grows in between (the call's own argument conversion
// allocates) the memory grows, the view's buffer is detached, and the
// browser throws "Cannot perform Construct on a detached ArrayBuffer".
// js.CopyBytesToJS copies from Go memory safely at any heap size.
func (d *Device) writeQueue(b *wgpu.Buffer, off uint64, p []byte) error {
	s := &d.stage
	if s.n < len(p) {
		s.n = max(len(p), 2*s.n, 4096)
		s.arr = js.Global().Get("Uint8Array").New(s.n)
	}
	view := s.arr
	if len(p) < s.n {
		view = s.arr.Call("subarray", 0, len(p))
	}
	js.CopyBytesToJS(view, p)
	jsObject(d.q).Call("writeBuffer", jsObject(b), off, s.arr, 0, len(p))
	return nil
}

// stageBuf is writeQueue's staging array, grown as needed (never per
// token once the largest write has been seen).
type stageBuf struct {
	arr js.Value
	n   int
}

// jsObject is the JavaScript object behind a cogentcore/webgpu v0.23.0
// js type: each (Queue, Buffer) is a struct whose only field is that
// js.Value, unexported; the binding is frozen at this version (go.mod).
func jsObject[T wgpu.Queue | wgpu.Buffer](p *T) js.Value {
	return *(*js.Value)(unsafe.Pointer(p))
}

// mapper awaits the staging buffer's mapAsync promise with two callbacks
// made once, so a readback (one per decoded token) allocates nothing in
// Go. cogentcore/webgpu's Buffer.MapAsync is not used: it reports success
// even when the promise rejects (a lost device), makes two js.Funcs per
// call, and links log/slog into the bundle for its error log.
type mapper struct {
	ok, fail js.Func
	done     chan error
}

func (m *mapper) init() {
	m.done = make(chan error, 1)
	m.ok = js.FuncOf(func(js.Value, []js.Value) any {
		m.done <- nil
		return nil
	})
	m.fail = js.FuncOf(func(_ js.Value, args []js.Value) any {
		reason := "rejected"
		if len(args) > 0 {
			if msg := args[0].Get("message"); msg.Type() == js.TypeString {
				reason = args[0].Get("name").String() + ": " + msg.String()
			}
		}
		m.done <- errors.New(reason)
		return nil
	})
}

func (m *mapper) release() {
	m.ok.Release()
	m.fail.Release()
}

// readStaging maps the first size bytes of the staging buffer, copies
// them to dst and unmaps it. It blocks the calling goroutine (never the
// event loop: the promise settles there) until mapAsync settles.
func (d *Device) readStaging(size uint64, dst []byte) error {
	b := jsObject(d.staging)
	b.Call("mapAsync", uint32(wgpu.MapModeRead), 0, size).Call("then", d.mapper.ok, d.mapper.fail)
	if err := <-d.mapper.done; err != nil {
		return fmt.Errorf("wgsl: map staging: %w", err)
	}
	view := js.Global().Get("Uint8Array").New(b.Call("getMappedRange", 0, size))
	js.CopyBytesToGo(dst[:min(uint64(len(dst)), size)], view)
	b.Call("unmap")
	return nil
}
