//go:build cgo || js

package wgsl

import (
	"fmt"
	"strings"
	"unsafe"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Memory is what a Runner holds on the GPU, in bytes.
type Memory struct {
	Weights int64 // matrices as uploaded (PackMat: block formats in their blocks, q8 widened to f16) and vectors (f32)
	State   int64 // KDA states and conv tails, MLA latent caches for MaxContext tokens
	Scratch int64 // activations for MaxChunk tokens, attention and sampling scratch
}

// Total is the sum of the parts.
func (m Memory) Total() int64 { return m.Weights + m.State + m.Scratch }

// EstimateMemory estimates the GPU memory a Runner for m with opt needs
// (the weights exactly, as the runner uploads them: each matrix in its GPU
// dtype and layout, MatWords; scratch to within a few percent), from
// shapes alone: it reads no weight data.
func EstimateMemory(m *model.Model, opt RunnerOptions) Memory {
	c := m.Cfg
	opt = opt.withDefaults(c)
	st := model.ComputeStats(c)
	T, d, V := int64(opt.MaxChunk), int64(c.HiddenSize), int64(c.VocabSize)
	hd := int64(max(c.KDAHeads*c.KDAHeadDim, c.NumHeads*(c.QKNopeHeadDim+c.QKRopeHeadDim), c.NumHeads*c.VHeadDim, 1))
	inter := int64(max(c.IntermediateSize, c.TopK*c.MoEIntermediateSize, 1))
	scratch := 4 * (T*(12*d+12*hd+2*inter+V) + 2*V + int64(c.NumHeads)*int64(opt.MaxContext))
	if c.NumExperts > 0 { // grouped-expert order and outputs
		K, E := int64(c.TopK), int64(c.NumExperts)
		scratch += 4 * (E + 1 + T*K + T*K*int64(max(c.HiddenSize, c.ExpertWidth())))
	}
	sz := &sizer{mats: map[*tensor.Mat]bool{}, vecs: map[*float32]bool{}}
	m.Declare(sz)
	return Memory{
		Weights: 4 * sz.words,
		State:   st.KDAStateBytes + st.CacheBytesPerTok*int64(opt.MaxContext),
		Scratch: scratch,
	}
}

// sizer is an nn.Uploader that adds up the words the runner's upload of
// each declaration takes (a matrix or vector declared twice, as tied
// embeddings are, counts once).
type sizer struct {
	mats  map[*tensor.Mat]bool
	vecs  map[*float32]bool
	words int64
}

func (s *sizer) mat(m *tensor.Mat, dt tensor.DType) {
	if m != nil && !s.mats[m] {
		s.mats[m] = true
		s.words += int64(MatWords(m.Rows, m.Cols, dt))
	}
}

func (s *sizer) Mats(_ []string, ms ...*tensor.Mat) {
	for _, m := range ms {
		if m != nil {
			s.mat(m, GPUDType(m.DType))
		}
	}
}

func (s *sizer) Vecs(_ []string, vs ...[]float32) {
	for _, v := range vs {
		if len(v) > 0 && !s.vecs[unsafe.SliceData(v)] {
			s.vecs[unsafe.SliceData(v)] = true
			s.words += int64(len(v))
		}
	}
}

func (s *sizer) GLUs(_ string, ws []nn.GLU) {
	var gu, dn []*tensor.Mat // as UploadGLU packs them
	for _, w := range ws {
		gu = append(gu, w.GateProj, w.UpProj)
		dn = append(dn, w.DownProj)
	}
	for _, set := range [][]*tensor.Mat{gu, dn} {
		dt := setDType(set)
		for _, m := range set {
			s.mat(m, dt)
		}
	}
}

func (s *sizer) Err() error { return nil }

// MemoryError says a model does not fit the GPU: what it needs, and the
// budget it was checked against or what was allocated when the device ran
// out of memory.
type MemoryError struct {
	Need       Memory
	Budget     int64 // the budget exceeded (0: the device ran out)
	Allocated  int64 // bytes allocated when the device ran out
	MaxContext int
	Err        error // the device's out-of-memory error
}

func (e *MemoryError) Error() string {
	need := fmt.Sprintf("the model needs about %s of GPU memory (weights %s, state and caches for %d tokens %s, scratch %s)",
		mib(e.Need.Total()), mib(e.Need.Weights), e.MaxContext, mib(e.Need.State), mib(e.Need.Scratch))
	const remedy = "use the CPU backend, a smaller model, or a shorter context"
	if e.Budget > 0 {
		return fmt.Sprintf("%s but %s is available; %s", need, mib(e.Budget), remedy)
	}
	return fmt.Sprintf("%s and the device ran out after %s (%v); %s", need, mib(e.Allocated), e.Err, remedy)
}

func (e *MemoryError) Unwrap() error { return e.Err }

func mib(n int64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// isOutOfMemory reports a device error that says it ran out of memory.
func isOutOfMemory(err error) bool {
	s := strings.ToLower(err.Error())
	return strings.Contains(s, "out of memory") || strings.Contains(s, "outofmemory") || strings.Contains(s, "out-of-memory")
}
