package model

import (
	"time"

	"github.com/tessera-llm/tessera/core/cpu"
	"github.com/tessera-llm/tessera/core/nn"
)

// cpuBackend is the CPU backend (core/cpu) with what the runner adds: a
// whole MoE block as one op (its expert grouping and batched decode GEMVs,
// see moe and moeDecode), route hooks, traces and profiles.
type cpuBackend struct {
	*cpu.Backend
	r *Runner
	s scratch
}

// MoE runs a whole MoE block: moe (prefill pieces) or moeDecode.
func (b *cpuBackend) MoE(out, x nn.Tensor, T int, w *nn.MoE, a *nn.MoEArgs, accum bool) bool {
	y := b.s.ffn[:T*b.r.M.Cfg.HiddenSize]
	xs := b.Data(x, T)
	if T == 1 {
		b.moeDecode(w, a.Act, xs, y)
	} else {
		b.moe(w, a.Act, xs, y, T)
	}
	if h := b.r.RouteHook; h != nil {
		K := b.r.M.Cfg.TopK
		h(a.Layer, b.s.idx[:T*K], b.s.wts[:T*K], T, K)
	}
	b.Store(out, y, T, accum)
	return true
}

func (b *cpuBackend) Tracing() bool { return b.r.Trace != nil }

func (b *cpuBackend) Trace(name string, layer int, t nn.Tensor, T int) {
	b.r.Trace(name, layer, b.Data(t, T), T)
}

func (b *cpuBackend) Profiling() bool { return b.r.Profile != nil }

func (b *cpuBackend) Account(op nn.Op, d time.Duration) { b.r.Profile.Dur[op] += d }
