//go:build cgo || js

package conformance

import (
	"math/rand/v2"

	"github.com/tessera-llm/tessera/core/tensor"
)

// Case is one conformance case: Run computes the GPU result and the
// core/ref oracle on the same inputs; their NMSE must stay below Bound.
type Case struct {
	Op, DType, Shape string
	Bound            float64
	Run              func(g *GPU, r *rand.Rand) (got, want []float32)
}

var dtypes = []tensor.DType{tensor.F32, tensor.F16, tensor.BF16}

// adder registers one case: op, dtype, shape, NMSE bound and run.
type adder func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32))

// Cases lists every conformance case; each op's cases sit in the file
// named after its kernel (linear.go for linear.wgsl, …).
func Cases() []Case {
	var cs []Case
	add := func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, Case{op, dt, shape, bound, run})
	}
	for _, f := range []func(adder){linearCases, normCases, elementwiseCases, convCases, kdaPrepCases, kdaGateCases, kdaCases, kdaChunkCases, mlaCases, routerCases, attnresCases, embedCases, moeCases, argmaxCases, sampleCases, familyCases, gqaCases} {
		f(add)
	}
	cs = append(cs, visionCases()...)
	return cs
}

func check(g *GPU, err error) {
	g.t.Helper()
	if err != nil {
		g.t.Fatal(err)
	}
}
