package cpu

import (
	"github.com/tessera-llm/tessera/core/nn"
	"github.com/tessera-llm/tessera/core/ref"
)

// The vision tower's ops (nn.VisionBackend).

func (b *Backend) LayerNorm(out, x nn.Tensor, T int, w, bias []float32, eps float32) {
	o, s := ct(out), ct(x)
	if o.stride == o.cols && s.stride == s.cols {
		ref.LayerNorm(o.d[:T*o.cols], s.d[:T*s.cols], w, bias, eps)
		return
	}
	for t := 0; t < T; t++ {
		ref.LayerNorm(o.row(t), s.row(t), w, bias, eps)
	}
}

func (b *Backend) BiasAct(x nn.Tensor, T int, bias []float32, act nn.Activation) {
	s := ct(x)
	f := ref.GELUTanh
	if act == nn.ActGELUErf {
		f = ref.GELUErf
	}
	for t := 0; t < T; t++ {
		row := s.row(t)
		if bias != nil {
			add(row, bias)
		}
		if act != nn.ActNone {
			for i, v := range row {
				row[i] = f(v)
			}
		}
	}
}

func (b *Backend) RoPE2D(x nn.Tensor, T, H, hd int, cos, sin nn.Tensor) {
	s := ct(x)
	v := gather(s, T, &b.tmp)
	ref.ApplyRoPE(v, T, H, hd, ct(cos).d, ct(sin).d)
	if s.stride != s.cols {
		b.Store(x, v, T, false)
	}
}

func (b *Backend) ImageAttention(out, q, k, v nn.Tensor, T, H, hd int) {
	// strided views (of a fused qkv row) gathered, each into its own scratch
	qs, ks, vs := gather(ct(q), T, &b.tmp), gather(ct(k), T, &b.res), gather(ct(v), T, &b.tmp2)
	ref.ImageAttention(b.Pool, ct(out).flat(T), qs, ks, vs, T, H, hd)
}

func (b *Backend) Read(t nn.Tensor, T int, dst []float32) error {
	copy(dst, gather(ct(t), T, &b.tmp))
	return nil
}
