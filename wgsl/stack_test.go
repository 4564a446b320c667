//go:build cgo

package wgsl_test

import (
	"testing"

	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/tensor"
)

// widenLast is an nn.Uploader that turns the last matrix of every group
// of three or more declared together into F32 (the same values), so the
// group mixes dtypes the way a Q4_K_M file mixes Q4_K and Q6_K.
type widenLast struct{ n int }

func (w *widenLast) Mats(_ []string, mats ...*tensor.Mat) {
	var ms []*tensor.Mat
	for _, m := range mats {
		if m != nil {
			ms = append(ms, m)
		}
	}
	if len(ms) < 3 || ms[len(ms)-1].DType == tensor.F32 {
		return
	}
	m := ms[len(ms)-1]
	m.F32, m.U16, m.DType = m.Float32(), nil, tensor.F32
	w.n++
}
func (w *widenLast) Vecs([]string, ...[]float32) {}
func (w *widenLast) GLUs(string, []nn.GLU)       {}
func (w *widenLast) Err() error                  { return nil }

// Matrices declared together but of two dtypes are stacked in runs of one
// dtype (one GEMV per run in a decoded token): the GPU runner still gives
// the CPU's logits and greedy tokens.
func TestRunnerStacksRunsOfOneDType(t *testing.T) {
	d := device(t)
	for _, preset := range []string{"k3-nano", "kimi-linear-nano"} {
		t.Run(preset, func(t *testing.T) {
			m := presetModel(t, preset, 3, "F16")
			w := &widenLast{}
			m.Declare(w)
			if w.n == 0 {
				t.Fatal("no group of three matrices to mix")
			}
			matchesCPU(t, d, m, []int{5, 6, 7, 8, 9, 10, 11, 12, 13}, 4)
		})
	}
}
