//go:build js

package wgsl

import (
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
