//go:build cgo || (js && !cpuonly)

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

	// The routed experts on the GPU, part of Weights: MoELayers layers
	// (not counting those run on the CPU) of Experts experts of
	// ExpertBytes each, TopK of them routed per token. A
	// runner under a budget below Total keeps Slots(budget) of each
	// layer's experts on the GPU and streams the rest (stream.go).
	ExpertBytes        int64
	Experts, MoELayers int
	TopK               int
	// BindingSlots is the most experts one layer's buffers hold within a
	// storage binding: a layer with more experts streams them.
	BindingSlots int
}

// Total is the sum of the parts.
func (m Memory) Total() int64 { return m.Weights + m.State + m.Scratch }

// RoutedBytes is the routed experts' part of Weights.
func (m Memory) RoutedBytes() int64 { return m.ExpertBytes * int64(m.Experts*m.MoELayers) }

// WithSlots is the memory with slots experts of each MoE layer resident
// (plus their slot tables): the dense part, state and scratch stay.
func (m Memory) WithSlots(slots int) int64 {
	if slots >= m.Experts {
		return m.Total()
	}
	return m.Total() - m.RoutedBytes() + int64(slots*m.MoELayers)*m.ExpertBytes
}

// MinTotal is the least memory a runner can work in: every routed expert
// streamed through TopK slots per MoE layer (Total without experts).
func (m Memory) MinTotal() int64 { return m.WithSlots(m.TopK) }

// Slots is the experts per MoE layer a budget holds: all of them when the
// whole model fits (or budget ≤ 0: no budget), else as many as fit beside
// the dense part, state and scratch; fewer than TopK (also 0 for a model
// without experts that does not fit) means the budget is too small. It
// never exceeds BindingSlots: a layer whose experts do not fit one
// storage binding streams them whatever the budget.
func (m Memory) Slots(budget int64) int {
	if budget <= 0 || m.Total() <= budget {
		return min(m.Experts, m.BindingSlots)
	}
	if m.Experts == 0 || m.ExpertBytes == 0 || m.MoELayers == 0 {
		return 0
	}
	return int(min(int64(min(m.Experts, m.BindingSlots)), max(0, budget-m.WithSlots(0))/(m.ExpertBytes*int64(m.MoELayers))))
}

// Budget is the budget holding frac (0…1) of the routed experts beside
// the rest: the meaning of a budget given as a percentage (50%: the dense
// part, state and scratch, and half of each layer's experts).
func (m Memory) Budget(frac float64) int64 {
	if frac >= 1 || m.MoELayers == 0 {
		return m.Total()
	}
	return m.WithSlots(int(frac * float64(m.Experts)))
}

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
	if w := kdaPrefillScratch(c, opt.MaxChunk); w > 0 { // the chunked delta-rule prefill's
		scratch += 4 * int64(scratchWords(w))
	}
	sz := &sizer{mats: map[*tensor.Mat]bool{}, vecs: map[*float32]bool{}}
	m.Declare(sz)
	mem := Memory{
		Weights: 4 * sz.words,
		State:   st.KDAStateBytes + st.CacheBytesPerTok*int64(opt.MaxContext),
		Scratch: scratch,
	}
	var ex experts
	m.Declare(&ex)
	if ex.first != nil {
		g, d := ex.first.GateProj, ex.first.DownProj
		gw := MatWords(g.Rows, g.Cols, ex.gu)
		dw := MatWords(d.Rows, d.Cols, ex.dn)
		mem.ExpertBytes = 4 * int64(2*gw+dw)
		mem.BindingSlots = maxBindingWords / max(2*gw, dw, 1)
		mem.Experts, mem.TopK, mem.MoELayers = ex.n, c.TopK, ex.layers
		// the experts of the layers run on the CPU stay on the host
		n := min(max(opt.CPUMoELayers, 0), mem.MoELayers)
		mem.Weights -= int64(n*mem.Experts) * mem.ExpertBytes
		mem.MoELayers -= n
	}
	return mem
}

// experts is an nn.Uploader that notes the routed expert sets a model
// declares (GLUs of more than one block): the first one's matrices and
// their dtypes on the GPU (gate/up, down: PackGLU), how many experts, and
// how many layers.
type experts struct {
	first     *nn.GLU
	gu, dn    tensor.DType
	n, layers int
}

func (x *experts) Mats([]string, ...*tensor.Mat) {}
func (x *experts) Vecs([]string, ...[]float32)   {}
func (x *experts) Err() error                    { return nil }

func (x *experts) GLUs(_ string, ws []nn.GLU) {
	if len(ws) > 1 {
		if x.first == nil {
			x.first, x.n = &ws[0], len(ws)
			x.gu, x.dn = gluDTypes(ws)
		}
		x.layers++
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
			s.mat(m, gpuDType(m))
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
	gu, dn := gluDTypes(ws)
	for _, w := range ws {
		s.mat(w.GateProj, gu)
		s.mat(w.UpProj, gu)
		s.mat(w.DownProj, dn)
	}
}

// gluDTypes are the dtypes PackGLU gives ws's gate/up and down matrices.
func gluDTypes(ws []nn.GLU) (gu, dn tensor.DType) {
	var gs, ds []*tensor.Mat
	for _, w := range ws {
		gs = append(gs, w.GateProj, w.UpProj)
		ds = append(ds, w.DownProj)
	}
	return setDType(gs), setDType(ds)
}

func (s *sizer) Err() error { return nil }

// MemoryError says a model does not fit the GPU: what it needs, and the
// budget it was checked against or what was allocated when the device ran
// out of memory.
type MemoryError struct {
	Need       Memory
	Min        int64 // the least memory with experts streamed (0: no experts)
	Budget     int64 // the budget exceeded (0: the device ran out)
	Allocated  int64 // bytes allocated when the device ran out
	MaxContext int
	Err        error // the device's out-of-memory error
}

func (e *MemoryError) Error() string {
	need := fmt.Sprintf("the model needs about %s of GPU memory (weights %s, state and caches for %d tokens %s, scratch %s)",
		mib(e.Need.Total()), mib(e.Need.Weights), e.MaxContext, mib(e.Need.State), mib(e.Need.Scratch))
	const remedy = "use the CPU backend, a smaller model, or a shorter context"
	if e.Budget > 0 && e.Min > 0 {
		return fmt.Sprintf("%s, at least %s with its routed experts streamed through %d per MoE layer (weights without the experts %s), but %s is available; %s",
			need, mib(e.Min), e.Need.TopK, mib(e.Need.Weights-e.Need.RoutedBytes()), mib(e.Budget), remedy)
	}
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
