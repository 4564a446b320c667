package model

import (
	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// mlaScratch is the scratch of one MLA mixer: the query q
// [T, H·(dn+dr)], q_a [T, r_q], [c_kv; k_r] [T, r_kv+dr], the output gate
// and the attention output o [T, H·dv], tmp [T, d], room for the products.
type mlaScratch struct {
	q, qa, kva, gate, o, tmp nn.Tensor
	products                 []nn.Product
	att                      nn.LatentArgs // kept here so that passing it allocates nothing
}

// inputs are the MLA projections of the normed input: q (or q_a), kv_a
// and the output gate.
func (w *MLA) inputs() [4]*tensor.Mat {
	return [4]*tensor.Mat{w.QProj, w.QAProj, w.KVAProjWithMQA, w.GProj}
}

// declare lists the MLA's weights to u under the prefix a ("….self_attn."),
// grouped as mlaBlock uses them.
func (w *MLA) declare(u nn.Uploader, a string) {
	in := w.inputs()
	u.Mats(names(a, "q_proj", "q_a_proj", "kv_a_proj_with_mqa", "g_proj"), in[:]...)
	u.Mats(names(a, "q_b_proj"), w.QBProj)
	u.Mats(names(a, "kv_b_proj"), w.KVBProj)
	u.Mats(names(a, "o_proj"), w.OProj)
	u.Vecs(names(a, "q_a_layernorm"), w.QALayernorm)
	u.Vecs(names(a, "kv_a_layernorm"), w.KVALayernorm)
}

// mlaBlock is one multi-head latent attention mixer (architecture.md §2)
// of the Kimi family (NoPE, optional output gate) and DeepSeek-V3
// (decoupled RoPE):
//
//	q = q_proj·x, or q_b·RMSNorm(q_a·x)                 per head [q_nope; q_rope]
//	[c_kv; k_r] = kv_a_proj_with_mqa·x, c_kv = RMSNorm(c_kv)
//	q_rope, k_r ← RoPE(·, position)                      (rope non-nil)
//	[c_kv; k_r] appended to the cache
//	o = softmax(scale · (q_nope·W_UK c_kv + q_rope·k_r)) (W_UV c_kv)
//	out (+)= o_proj · (o ⊙ σ(g_proj·x))                  (gate if present)
//
// pos0 is the position of the piece's first token.
func mlaBlock(b nn.Backend, s *mlaScratch, c *config.Config, w *MLA, xn nn.Tensor, cache nn.Cache, out nn.Tensor, accum bool, T int, rope *ref.RoPE, pos0 int, scale float32) {
	H, dn, dr, dv, rkv := c.NumHeads, c.QKNopeHeadDim, c.QKRopeHeadDim, c.VHeadDim, c.KVLoraRank
	ps := s.products[:0]
	dsts := [4]nn.Tensor{s.q, s.qa, s.kva, s.gate}
	for j, W := range w.inputs() {
		var dst nn.Tensor
		if W != nil {
			dst = b.Reshape(dsts[j], W.Rows)
		}
		ps = append(ps, nn.Product{Out: dst, X: xn, W: W})
	}
	nn.Linears(b, T, ps)
	q, kva, gate := ps[0].Out, ps[2].Out, ps[3].Out
	if w.QProj == nil {
		q = b.Reshape(s.q, w.QBProj.Rows)
		nn.LinearNormed(b, q, false, ps[1].Out, T, w.QBProj, w.QALayernorm, c.RMSNormEps, s.tmp)
	}
	if rope != nil { // k_r lies after c_kv: its rotation and c_kv's norm (AppendAttend) commute
		b.RoPE(q, T, nn.RoPEArgs{Heads: H, Stride: dn + dr, Off: dn, Pos0: pos0, Rope: rope})
		b.RoPE(kva, T, nn.RoPEArgs{Heads: 1, Stride: rkv + dr, Off: rkv, Pos0: pos0, Rope: rope})
	}
	o := b.Reshape(s.o, H*dv)
	s.att = nn.LatentArgs{T: T, H: H, DN: dn, DR: dr, DV: dv, RKV: rkv, Scale: scale, Q: q, O: o, WKVB: w.KVBProj, Cache: cache}
	nn.AppendAttend(b, &s.att, kva, w.KVALayernorm, c.RMSNormEps)
	if w.GProj != nil {
		nn.LinearGated(b, out, accum, o, gate, T, w.OProj, s.tmp)
		return
	}
	nn.Project(b, out, o, T, w.OProj, accum, s.tmp)
}
