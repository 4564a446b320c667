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

// blockDTypes are the formats the kernels read as they are
// (wgsl.BlockFormat: ggml's block formats and Q8); their cases have whole
// blocks (Q8: 32-value units) per row.
var blockDTypes = []tensor.DType{tensor.Q8, tensor.Q8_0, tensor.Q4_0, tensor.Q5_0, tensor.MXFP4, tensor.Q4K, tensor.Q5K, tensor.Q6K}

// BlockDTypes lists blockDTypes' names (the support matrix's columns).
func BlockDTypes() []string {
	var s []string
	for _, dt := range blockDTypes {
		s = append(s, dt.String())
	}
	return s
}

// blockCols are row widths for dt's cases: one block and several, and
// for 32-element blocks widths that are not whole 256-element blocks.
func blockCols(dt tensor.DType) []int {
	if dt.BlockLen() == 256 {
		return []int{256, 768}
	}
	return []int{32, 96, 256}
}

// adder registers one case: op, dtype, shape, NMSE bound and run.
type adder func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32))

// Cases lists every conformance case; each op's cases sit in the file
// named after its kernel (linear.go for linear.wgsl, …).
func Cases() []Case {
	var cs []Case
	add := func(op, dt, shape string, bound float64, run func(g *GPU, r *rand.Rand) ([]float32, []float32)) {
		cs = append(cs, Case{op, dt, shape, bound, run})
	}
	for _, f := range []func(adder){linearCases, blockCases, normCases, elementwiseCases, convCases, kdaPrepCases, kdaStepCases, kdaGateCases, kdaCases, kdaChunkCases, mlaCases, routerCases, attnresCases, embedCases, moeCases, argmaxCases, sampleCases, familyCases, gqaCases} {
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
