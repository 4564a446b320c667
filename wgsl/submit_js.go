//go:build js

package wgsl

import "github.com/cogentcore/webgpu/wgpu"

type submission = struct{}

func (d *Device) submit(cmd *wgpu.CommandBuffer) submission {
	d.q.Submit(cmd)
	return submission{}
}

// wait is a no-op in the browser: MapAsync awaits the queue itself.
func (d *Device) wait(submission) {}
