//go:build cgo || (js && !cpuonly)

package engine

import (
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/wgsl"
)

// GPUMemoryOf is what r, a runner of m, holds on its device: its buffers
// as allocated, and their parts as wgsl.EstimateMemory counts them for the
// runner's chunk, context, expert slots and CPU-run MoE layers.
func GPUMemoryOf(r *wgsl.Runner, m *model.Model) *GPUMemoryUse {
	if r == nil || m == nil {
		return nil
	}
	xs := r.ExpertStats()
	est := wgsl.EstimateMemory(m, wgsl.RunnerOptions{MaxChunk: r.MaxChunk(), MaxContext: r.MaxContext(), CPUMoELayers: xs.CPULayers})
	u := &GPUMemoryUse{Bytes: r.Bytes(), Weights: est.Weights, ModelWeights: est.Weights, State: est.State, Scratch: est.Scratch,
		Context: r.MaxContext(), ExpertBytes: est.ExpertBytes, ExpertSlots: xs.Slots, Experts: xs.Experts}
	if xs.Streaming { // the dense part and the slots are resident
		u.Weights = est.WithSlots(xs.Slots) - est.State - est.Scratch
	}
	if xs.CPULayers > 0 { // the model's weights include the experts left on the host
		u.ModelWeights = wgsl.EstimateMemory(m, wgsl.RunnerOptions{MaxChunk: r.MaxChunk(), MaxContext: r.MaxContext()}).Weights
	}
	return u
}
