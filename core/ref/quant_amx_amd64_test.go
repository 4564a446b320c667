//go:build amd64 && !purego

package ref

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"os/exec"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// TestAMXKernels runs prefill on the AMX tiles (Q4_K, Q6_K, Q8_0, Q4_0,
// MXFP4)
// and requires rowDotQ8's bits for every (row, token) — rows around the
// 16-row groups, however the workers cut them, tokens around the 16-token
// groups and the four groups of one kernel call, one block to several
// (odd 32-value block counts: the pair layout's lone last block), one and
// two workers — and the VNNI kernels' results within their rounding; the
// formats without AMX kernels stay on VNNI.
func TestAMXKernels(t *testing.T) {
	if !useAMX {
		t.Skip("no AMX on this CPU (or TESSERA_CPU_NO_AMX=1)")
	}
	rng := rand.New(rand.NewPCG(15, 21))
	ran := 0
	for _, workers := range []int{1, 2} {
		p := NewPool(workers)
		defer p.Close()
		for _, dt := range []tensor.DType{tensor.Q4K, tensor.Q6K, tensor.Q8_0, tensor.Q4_0, tensor.MXFP4} {
			for _, blocks := range []int{1, 2, 5, 8} {
				cols := dt.BlockLen() * blocks
				for _, rows := range []int{16, 17, 33, 70} {
					W, F := randomBlocked(rng, dt, rows, cols)
					for _, T := range []int{12, 16, 17, 31, 64, 65, 81} {
						name := fmt.Sprintf("%v/%dx%d/T%d/%d workers", dt, rows, cols, T, workers)
						x := make([]float32, T*cols)
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
						amx, vnni := make([]float32, T*rows), make([]float32, T*rows)
						withInt8Kern(kernAMX, func() { Linear(p, amx, x, T, W) })
						require.True(t, p.act.amx, "%s: the AMX path ran", name)
						withInt8Kern(kernVNNI, func() { Linear(p, vnni, x, T, W) })
						require.False(t, p.act.amx, "%s: VNNI set: no AMX layout", name)
						var a actQ8
						a.quantize(actKindOf(dt), x, cols, T)
						for tt := range T {
							for o := range rows {
								want, g, v := rowDotQ8(W, o, &a, tt, 0, a.blocks()), amx[tt*rows+o], vnni[tt*rows+o]
								require.Equal(t, math.Float32bits(want), math.Float32bits(g), "%s: row %d token %d: rowDotQ8 %v, AMX %v", name, o, tt, want, g)
								var mag float64
								for i := range cols {
									mag += math.Abs(float64(F.F32[o*cols+i] * x[tt*cols+i]))
								}
								require.InDelta(t, v, g, 2e-6*(1+mag), "%s: row %d token %d vs VNNI", name, o, tt)
							}
						}
						ran++
					}
				}
			}
		}
	}
	require.NotZero(t, ran)
	withInt8Kern(kernAMX, func() {
		for _, dt := range []tensor.DType{tensor.Q5_0, tensor.Q5K} {
			require.False(t, amxTakes(&tensor.Mat{DType: dt}, 64), "%v has no AMX kernel", dt)
		}
	})
}

// TestNoAMXEnv: TESSERA_CPU_NO_AMX=1 takes the AMX set away (VNNI is then
// the default), checked in a child process of this test binary.
func TestNoAMXEnv(t *testing.T) {
	if os.Getenv("TESSERA_CPU_NO_AMX") == "1" {
		require.False(t, useAMX)
		require.NotContains(t, Int8Kernels(), "amx")
		require.Equal(t, useVNNI, Int8Kernels()[0] == "vnni")
		return
	}
	if !useAMX {
		t.Skip("no AMX on this CPU")
	}
	require.Equal(t, "amx", Int8Kernels()[0], "AMX is the default where the CPU has it")
	cmd := exec.Command(os.Args[0], "-test.run=^TestNoAMXEnv$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TESSERA_CPU_NO_AMX=1")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "--- PASS: TestNoAMXEnv", "%s", out)
}
