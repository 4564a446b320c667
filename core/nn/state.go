package nn

import "github.com/tessera-llm/tessera/core/tensor"

// LayerState describes what one layer carries from token to token: fixed
// tensors (a recurrent state, conv tails: their sizes in floats, in the
// order Fixed returns them) and, when CacheWidth > 0, a growing cache of
// rows of that width.
type LayerState struct {
	Fixed      []int
	CacheWidth int
}

// State is the sequence state of one backend: per layer the fixed tensors
// and the cache a family asked for (LayerState), and the position.
type State interface {
	// Pos is the number of tokens of the sequence so far.
	Pos() int
	// Advance moves the position on by n tokens (a family calls it at the
	// end of a forward pass).
	Advance(n int)
	// Fixed is layer's i-th fixed tensor (see LayerState.Fixed).
	Fixed(layer, i int) Tensor
	// Cache is layer's cache (nil if it has none).
	Cache(layer int) Cache
	// Reset empties the state for a new sequence, keeping its memory.
	Reset() error
	// Bytes is the memory the state holds.
	Bytes() int64
}

// Uploader receives a family's weights (Model.Declare): a backend that
// copies weights to its own memory (the GPU) implements it; the CPU uses
// them in place. Names are the checkpoint names, for errors.
type Uploader interface {
	// Mats declares matrices that multiply the same input: a backend may
	// stack them for LinearBatch (nil entries skipped); or matrices whose
	// products of different inputs one fused op adds into one output
	// (LinearNormedGLU): a backend may keep them side by side.
	Mats(names []string, ms ...*tensor.Mat)
	// Vecs declares vectors a fused kernel may read together (stored
	// contiguously in this order; nil entries skipped).
	Vecs(names []string, vs ...[]float32)
	// GLUs declares one layer's experts (or a dense block: one GLU).
	GLUs(name string, ws []GLU)
	// Err is the first error of the declarations.
	Err() error
}

// Model is one model family's weights and forward pass, written once over
// Backend.
type Model interface {
	// Declare lists every weight to u, grouped as the forward pass uses
	// them.
	Declare(u Uploader)
	// StateSpec is the per-layer sequence state.
	StateSpec() []LayerState
	// Build allocates the forward pass's scratch on b for pieces of up to
	// maxT tokens.
	Build(b Backend, maxT int) Graph
}

// Graph is a family's forward pass bound to a backend and its scratch.
type Graph interface {
	// Forward runs a piece of T tokens at st.Pos(), advances st and
	// returns the final-normed hidden states [T, d]. The caller checks
	// b.Err() afterwards.
	Forward(st State, in Input, T int) Tensor
}
