package nn

// Activation is the elementwise activation of BiasAct.
type Activation uint8

// The activations of BiasAct.
const (
	ActNone     Activation = iota
	ActGELUTanh            // gelu_pytorch_tanh (ref.GELUTanh)
	ActGELUErf             // exact GELU (ref.GELUErf)
)

// VisionBackend is a Backend with the ops of the vision tower
// (architecture.md §6: a pre-norm ViT with 2D RoPE and a patch-merging
// projector).
type VisionBackend interface {
	Backend
	// LayerNorm: out = (x − μ) / sqrt(σ² + eps) ⊙ w + b per row of len(w)
	// (biased variance; b nil: no bias; ref.LayerNorm). out may alias x.
	LayerNorm(out, x Tensor, T int, w, b []float32, eps float32)
	// BiasAct: x ← act(x + b), in place (b nil: no bias).
	BiasAct(x Tensor, T int, b []float32, act Activation)
	// RoPE2D rotates each head (H of hd) of every row of x in place by
	// the tables cos, sin [T, hd/2] (ref.ApplyRoPE); x may be a column
	// view of a fused row.
	RoPE2D(x Tensor, T, H, hd int, cos, sin Tensor)
	// ImageAttention is non-causal attention over the T rows
	// (ref.ImageAttention): out[n,h] = Σ_m softmax_m(q[n,h]·k[m,h]/√hd)
	// v[m,h]. q, k, v may be column views of one fused row.
	ImageAttention(out, q, k, v Tensor, T, H, hd int)
	// Read copies the first T rows of t to dst (host).
	Read(t Tensor, T int, dst []float32) error
}
