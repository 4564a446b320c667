//go:build cgo || js

package wgsl

import (
	"fmt"
)

// Op wrappers of attnres.wgsl.

// AttnRes records Block Attention Residuals reads (ref.AttnRes) for T
// tokens: source i of token t is the n floats at
// srcs.Off + t·tokStride + i·srcs.Stride (nsrc ≤ 64); w and gamma [n];
// out row t at out.Off + t·out.Stride. out must not overlap a source.
func (d *Device) AttnRes(out Strided, srcs Strided, tokStride, nsrc, n, T int, w, gamma View, eps float32) error {
	return d.attnRes(out, srcs, tokStride, nsrc, n, T, w, gamma, eps, View{}, 0)
}

// AttnResNorm is AttnRes followed by the RMSNorm with weight norm (as
// RMSNorm: ν ⊙ h / sqrt(mean(h²) + normEps)) in one dispatch: the model
// normalises every AttnRes read before the mixer, the FFN or the lm_head.
func (d *Device) AttnResNorm(out Strided, srcs Strided, tokStride, nsrc, n, T int, w, gamma View, eps float32, norm View, normEps float32) error {
	if err := norm.check(n, "AttnResNorm norm weight"); err != nil {
		return err
	}
	return d.attnRes(out, srcs, tokStride, nsrc, n, T, w, gamma, eps, norm, normEps)
}

func (d *Device) attnRes(out Strided, srcs Strided, tokStride, nsrc, n, T int, w, gamma View, eps float32, norm View, normEps float32) error {
	if T <= 0 || n <= 0 || nsrc <= 0 || nsrc > 64 {
		return fmt.Errorf("wgsl: AttnRes: T %d, n %d, %d sources (≤ 64)", T, n, nsrc)
	}
	if err := srcs.View.check((T-1)*tokStride+(nsrc-1)*srcs.Stride+n, "AttnRes sources"); err != nil {
		return err
	}
	if err := out.check(T, n, "AttnRes out"); err != nil {
		return err
	}
	if err := w.check(n, "AttnRes w"); err != nil {
		return err
	}
	if err := gamma.check(n, "AttnRes gamma"); err != nil {
		return err
	}
	k, err := d.kernel("attnres.wgsl", "main", 5)
	if err != nil {
		return err
	}
	p := params{}.u(n, nsrc, T).f(eps).u(srcs.Off, srcs.Stride, tokStride, w.Off, gamma.Off, out.Off, out.Stride,
		b2i(norm.Buf != nil), norm.Off).f(normEps)
	return d.dispatch(k, p, []*Buffer{srcs.Buf, w.Buf, gamma.Buf, out.Buf, norm.Buf}, T)
}
