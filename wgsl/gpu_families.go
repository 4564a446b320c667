//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
)

// The ops the qwen3_next and deepseek_v3 families add to nn.Backend, on
// the GPU (family.go, gqa.go).

func (b *gpu) Repeat(out, x nn.Tensor, T, d, r int) {
	if b.err == nil {
		s := g(x)
		b.fail(b.d.Repeat(g(out).s(), s.s(), T, s.cols, d, r))
	}
}

func (b *gpu) RoPE(x nn.Tensor, T int, a nn.RoPEArgs) {
	if b.err != nil {
		return
	}
	tab := b.ropeTable(a.Rope)
	if b.err == nil {
		b.fail(b.d.RoPE(RoPEArgs{T: T, Heads: a.Heads, HStride: a.Stride, Off: a.Off, Half: a.Rope.Dim / 2, Pos0: a.Pos0,
			Interleaved: a.Rope.Interleaved, X: g(x).s(), Table: tab}))
	}
}

// ropeTable is r's cos/sin table for every position of the runner's
// context (ref.RoPE.Table, float64 angles), uploaded on first use: Dim
// floats per position, small beside the K/V or latent cache of a token.
func (b *gpu) ropeTable(r *ref.RoPE) View {
	if v, ok := b.ropes[r]; ok {
		return v
	}
	n := b.maxContext
	buf, err := b.newBuf(n * r.Dim)
	if err != nil {
		b.fail(err)
		return View{}
	}
	host := make([]float32, n*r.Dim)
	r.Table(host, 0, n)
	b.fail(buf.WriteF32(0, host))
	b.ropes[r] = buf.At(0)
	return buf.At(0)
}

func (b *gpu) Attention(a *nn.AttnArgs) {
	if b.err == nil {
		c := a.Cache.(*LatentCache)
		b.fail(b.d.GQA(&GQAArgs{N: a.T, H: a.H, HKV: a.HKV, D: a.D, Pos0: c.Len - a.T, Scale: a.Scale,
			Q: g(a.Q).v, O: g(a.O).v, Cache: c}))
	}
}
