package cpu

import (
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
)

// The ops of the qwen3_next and deepseek_v3 families (nn.Backend).

func (b *Backend) Repeat(out, x nn.Tensor, T, d, r int) {
	o, s := ct(out), ct(x)
	for t := 0; t < T; t++ {
		ref.RepeatHeads(o.row(t), s.row(t), 1, s.cols/d, r, d)
	}
}

func (b *Backend) RoPE(x nn.Tensor, T int, a nn.RoPEArgs) {
	v := ct(x)
	for t := 0; t < T; t++ {
		row := v.row(t)
		a.Rope.Apply(row[a.Off:a.Off+(a.Heads-1)*a.Stride+a.Rope.Dim], a.Stride, a.Pos0+t)
	}
}

func (b *Backend) Attention(a *nn.AttnArgs) {
	c := a.Cache.(*ref.LatentCache)
	b.gqa = ref.GQAArgs{N: a.T, H: a.H, HKV: a.HKV, D: a.D, Pos0: c.Len() - a.T, Scale: a.Scale,
		Q: gather(ct(a.Q), a.T, &b.tmp), Cache: c, O: ct(a.O).flat(a.T)}
	ref.GQA(b.Pool, &b.gqa)
}
