// Package nn is the interface between model families and backends: a
// family (core/model's K3, …) writes its forward pass once as calls to the
// basic ops of a Backend, and each backend (the CPU reference in
// core/model, WebGPU in wgsl) implements those ops on its own tensors.
//
// Ops do not return errors: a backend keeps the first error of a forward
// pass and skips the ops after it (Err reports it), so a family reads like
// its equations. Fused kernels are optional capabilities (fused.go): a
// backend implements an interface such as LinearAccumer when it has a
// kernel for the pattern; the family calls the package function (nn.Project,
// nn.KDAPrep, …), which uses the capability when present and accepted and
// otherwise the unfused math written with basic ops. docs/adding-a-model.md
// describes how a family is defined.
package nn

import (
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Tensor is an activation held by a backend: rows of cols float32 values,
// row r at r·stride. Only the backend that made it reads it; families get
// tensors from Backend.Alloc, Rows and Cols and pass them back to ops.
type Tensor any

// Cache is a backend's growing per-layer cache of rows (an MLA latent
// cache, a KV cache), held by a State.
type Cache any

// Backend runs the basic ops of a forward pass. Shapes: T is the number of
// token rows an op works on; an op reads and writes the first T rows of
// its tensors. out may alias x where the doc says so.
type Backend interface {
	// Err is the first error of the ops so far (nil if none); a backend
	// clears it when a new forward pass starts (Begin).
	Err() error
	// Begin starts a forward pass (clears Err).
	Begin()

	// Alloc returns a fresh rows×cols tensor (scratch allocated once, at
	// graph build time).
	Alloc(rows, cols int) Tensor
	// Rows is the view of t from row r0 on.
	Rows(t Tensor, r0 int) Tensor
	// Reshape is t's memory (t contiguous) as contiguous rows of cols.
	Reshape(t Tensor, cols int) Tensor
	// Cols is the view of columns [c0, c0+n) of every row of t (its row
	// stride kept).
	Cols(t Tensor, c0, n int) Tensor

	// Embed: out[t] = table[ids[t]] for the T = len(ids) rows.
	Embed(out Tensor, table *tensor.Mat, ids []int)
	// SetRows copies T rows of host data ([T, cols], row-major) into out.
	SetRows(out Tensor, data []float32, T int)
	// Copy: out[t] = x[t].
	Copy(out, x Tensor, T int)
	// Add: out[t] += x[t].
	Add(out, x Tensor, T int)

	// Linear: out[t] = W·x[t] (W is [rows, cols] as in the checkpoint).
	Linear(out, x Tensor, T int, W *tensor.Mat)
	// RMSNorm: out[t] = x[t] / sqrt(mean(x[t]²) + eps) ⊙ w, over rows of
	// len(w) (out may alias x).
	RMSNorm(out, x Tensor, T int, w []float32, eps float32)
	// RMSNormGated: for each group of n = len(w) values of each row,
	// out = RMSNorm(x) ⊙ act(g) (out may alias x).
	RMSNormGated(out, x, g Tensor, T int, w []float32, eps float32, act ref.GateAct)
	// L2Norm: in place, each group of n values of each row:
	// x ← scale · x / sqrt(Σ x² + eps).
	L2Norm(x Tensor, T, n int, eps, scale float32)
	// Sigmoid: x ← σ(x), in place.
	Sigmoid(x Tensor, T int)
	// SigmoidGate: x ← x ⊙ σ(g), in place.
	SigmoidGate(x, g Tensor, T int)

	// ShortConv is the causal depthwise conv over time of the C channels
	// of x with kernel K (w is [C, K]), continuing from tail (the last K−1
	// inputs, [K−1, C], updated), then SiLU:
	// out[t,c] = SiLU(Σ_j w[c,j]·x[t−K+1+j, c]).
	ShortConv(out, x Tensor, T int, w []float32, tail Tensor, K int)
	// KDAGate turns raw = f_b(f_a(x)) into the per-channel log decay in
	// place (architecture.md §1.6; ref.KDAGate has the two forms).
	KDAGate(g Tensor, T int, a KDAGateArgs)
	// DeltaRule is the gated delta rule with per-channel decay over T
	// tokens (architecture.md §1.3–1.6, ref.KDARecurrent): per head
	// S ← Diag(exp g_t) S; S += k_t (β_t (v_t − Sᵀk_t))ᵀ; o_t = Sᵀ q_t.
	// A backend picks the recurrent or chunked form.
	DeltaRule(a *DeltaArgs)

	// Append appends T rows of rows to the cache c.
	Append(c Cache, rows Tensor, T int)
	// LatentAttention is MLA attention (architecture.md §2.2–2.3) of the
	// T queries of a.Q, the last T of a.Cache's rows being their own
	// latents: causal softmax over the cache, values expanded by kv_b_proj.
	LatentAttention(a *LatentArgs)

	// GLU: out[t] = Down·act(Gate·x[t], Up·x[t]) (architecture.md §3.1),
	// or out[t] += … when accum.
	GLU(out, x Tensor, T int, w *GLU, act ref.Act, accum bool)
	// GLUAct: gate[t] ← act(gate[t], up[t]) (ref.Act.GLU), in place.
	GLUAct(gate, up Tensor, T int, act ref.Act)
	// Route selects, per token, r.TopK experts from logits [T, E] (bias
	// for the selection only) and their weights (architecture.md §3.2–3.3)
	// into rt.
	Route(rt Routing, logits Tensor, T int, bias []float32, r ref.Router)
	// Experts: out[t] = Σ_k rt.Wts[t,k] · GLU_{rt.Idx[t,k]}(x[t]), or
	// out[t] += … when accum.
	Experts(out, x Tensor, T int, experts []GLU, rt Routing, act ref.Act, accum bool)
	// AttnRes is one Block Attention Residuals read per token over the
	// sources srcs (architecture.md §4.3, ref.AttnRes).
	AttnRes(out Tensor, srcs []Tensor, T int, w, gamma []float32, eps float32)

	// Repeat: out[t] = each group of d values of x[t] repeated r times in
	// place (ref.RepeatHeads): GQA-style head sharing, and with d = 1 the
	// broadcast of one value per head over a head's channels.
	Repeat(out, x Tensor, T, d, r int)
	// RoPE rotates x in place (ref.RoPE.Apply): in each row t, the first
	// a.Rope.Dim channels of each of a.Heads heads (a.Stride values apart,
	// the first at column a.Off) by the angles of position a.Pos0+t.
	RoPE(x Tensor, T int, a RoPEArgs)
	// Attention is causal grouped-query softmax attention (ref.GQA) of the
	// T queries of a.Q over the cache rows [k; v], the last T rows being
	// the queries' own.
	Attention(a *AttnArgs)
}

// RoPEArgs are the operands of RoPE.
type RoPEArgs struct {
	Heads, Stride, Off int
	Pos0               int
	Rope               *ref.RoPE
}

// AttnArgs are the operands of Attention: Q, O [T, H·D], the cache of rows
// [k (HKV·D); v (HKV·D)].
type AttnArgs struct {
	T, H, HKV, D int
	Scale        float32
	Q, O         Tensor
	Cache        Cache
}

// GLU is a gated feed-forward block: Down·act(Gate·x, Up·x). Dense layers
// and shared experts name the matrices gate_proj/up_proj/down_proj,
// routed experts w1/w3/w2.
type GLU struct {
	GateProj, UpProj *tensor.Mat // [I, d_in]
	DownProj         *tensor.Mat // [d_in, I]
}

// MoE is a sparse MoE block (block_sparse_moe.*), optionally LatentMoE
// (architecture.md §3.2–3.3).
type MoE struct {
	Gate                 *tensor.Mat // gate.weight [E, d] router
	EScoreCorrectionBias []float32   // gate.e_score_correction_bias [E], selection only
	Experts              []GLU       // experts.{e}.{w1,w3,w2}
	SharedExperts        *GLU        // shared_experts.* on the full x (nil if none)
	RoutedExpertDownProj *tensor.Mat // [ℓ, d] (LatentMoE)
	RoutedExpertUpProj   *tensor.Mat // [d, ℓ] (LatentMoE)
	RoutedExpertNorm     []float32   // [ℓ] (LatentMoE with latent_moe_use_norm)
}

// Routing holds the routing of T tokens: Idx [T, K] expert ids and Wts
// [T, K] weights (backend tensors; Idx holds integers).
type Routing struct {
	Idx, Wts Tensor
	K        int
}

// KDAGateArgs are the parameters of the KDA gate (ref.KDAGate).
type KDAGateArgs struct {
	H, DK      int
	DtBias     []float32 // [H·dk]
	ALog       []float32 // [H] or [H·dk]
	Bounded    bool
	LowerBound float32
}

// DeltaArgs are the operands of DeltaRule: Q, K, G [T, H·dk], V, O
// [T, H·dv], Beta [T, H], S the state [H, dk, dv].
type DeltaArgs struct {
	T, H, DK, DV           int
	Q, K, V, G, Beta, O, S Tensor
}

// LatentArgs are the operands of LatentAttention: Q [T, H·(dn+dr)], O
// [T, H·dv], the cache of rows [c_kv (r_kv); k_r (dr)].
type LatentArgs struct {
	T, H, DN, DR, DV, RKV int
	Scale                 float32
	Q, O                  Tensor
	WKVB                  *tensor.Mat // kv_b_proj [H·(dn+dv), r_kv]
	Cache                 Cache
}

// Input is a piece's input: token ids, or embeddings [T, d] (the vision
// path splices image features into the sequence this way).
type Input struct {
	IDs []int
	Emb []float32
}
