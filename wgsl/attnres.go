//go:build cgo || (js && !cpuonly)

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

// resRead is a decoded token's AttnResNorm held back by DeferAttnResNorm.
type resRead struct {
	out            View
	srcs           Strided
	nsrc, n        int
	w, gamma, norm View
	eps, normEps   float32
}

// maxResRows is the most rows a GEMV may have to take a held-back AttnRes
// read into its prologue: each of its workgroups recomputes the read (its
// sources twice over), so a wide GEMV such as the lm_head runs the read
// as its own dispatch instead.
const maxResRows = 4096

// repeatFusions is the device's choice of the decode fusions that repeat
// work in every workgroup to save a dispatch (SetRepeatFusions).
type repeatFusions struct {
	set, on bool
	groups  int
}

// SetRepeatFusions sets whether decoded tokens use the fusions that repeat
// work in every workgroup of a kernel to save a dispatch: the AttnRes read
// inside the GEMV that reads it (DeferAttnResNorm, gemv_res) and the MoE
// router inside the experts' gate/up kernel (RouteGateUp). groups is the
// workgroups a gemv_res runs: 0 gives each a GEMV's rows (gemvLanes); n > 0 gives n
// workgroups the rows between them (fewer repeats of the read). Until it
// is called the device chooses by adapter (SetAdapter): on a GPU, where a dispatch
// costs more than the repeated work, they are on with a GEMV's rows per
// workgroup; on a software adapter (lavapipe, SwiftShader), where every
// workgroup's repeat is CPU time, they are off: each measured slower there
// than the dispatch it saves (BENCHMARKS.md). Tests and benchmarks call it
// to run either way on any adapter; the function returned restores the
// choice before.
func (d *Device) SetRepeatFusions(on bool, groups int) (restore func()) {
	old := d.repeat
	d.repeat = repeatFusions{set: true, on: on, groups: max(groups, 0)}
	return func() { d.repeat = old }
}

// repeatFusions reports whether the repeating fusions are on: by adapter
// unless set, and off on a device with no adapter description (one the
// platform code did not describe could be a software adapter).
func (d *Device) repeatFusions() bool {
	if d.repeat.set {
		return d.repeat.on
	}
	return d.adapter != (AdapterInfo{}) && d.adapter.Software() == ""
}

// resGroups is the workgroups a gemv_res of rows rows runs.
func (d *Device) resGroups(rows int) int {
	blocks := d.gemvGroups(rows)
	if g := d.repeat.groups; g > 0 {
		return min(blocks, g)
	}
	return blocks
}

// DeferAttnResNorm is AttnResNorm for one token (out: n values), held back
// so that the GEMV reading out next computes it in its prologue
// (linear.wgsl's gemv_res: the read and the projection in one dispatch;
// Linear takes it when x is out, the product is plain, W.Cols = n ≤ 2048
// and W has at most maxResRows rows). Any other dispatch, a flush
// or a read records it first as AttnResNorm, so everything that reads out
// sees the same values either way.
func (d *Device) DeferAttnResNorm(out View, srcs Strided, nsrc, n int, w, gamma View, eps float32, norm View, normEps float32) error {
	if err := d.flushRes(); err != nil {
		return err
	}
	if err := norm.check(n, "AttnResNorm norm weight"); err != nil {
		return err
	}
	if !d.repeatFusions() || n > maxGatedNormCols {
		return d.attnRes(Strided{out, n}, srcs, 0, nsrc, n, 1, w, gamma, eps, norm, normEps)
	}
	if err := d.checkAttnRes(Strided{out, n}, srcs, 0, nsrc, n, 1, w, gamma); err != nil {
		return err
	}
	d.res, d.resHeld = resRead{out: out, srcs: srcs, nsrc: nsrc, n: n, w: w, gamma: gamma, norm: norm, eps: eps, normEps: normEps}, true
	return nil
}

// flushRes records the held-back AttnRes read, if any, as its own
// dispatch.
func (d *Device) flushRes() error {
	if !d.resHeld {
		return nil
	}
	d.resHeld = false
	r := &d.res
	return d.attnRes(Strided{r.out, r.n}, r.srcs, 0, r.nsrc, r.n, 1, r.w, r.gamma, r.eps, r.norm, r.normEps)
}

// dropRes forgets a held-back read (its buffers are being released).
func (d *Device) dropRes() { d.resHeld = false }

// takeRes returns the held-back read for a GEMV of W reading x, and
// forgets it, when that GEMV can compute it (see DeferAttnResNorm).
func (d *Device) takeRes(x View, W *Mat) (resRead, bool) {
	if !d.resHeld || d.res.out != x || W.Cols != d.res.n || W.Rows > maxResRows {
		return resRead{}, false
	}
	d.resHeld = false
	return d.res, true
}

// gemvRes records out = W·xn for the read r, computing xn = r's
// AttnResNorm in every workgroup and storing it at r.out from the first
// (linear.wgsl's gemv_res).
func (d *Device) gemvRes(out View, W *Mat, r *resRead) error {
	if err := out.check(W.Rows, "Linear out"); err != nil {
		return err
	}
	k, err := d.weightKernel("linear.wgsl", entry("gemv_res", W.DType), 7, W.DType)
	if err != nil {
		return err
	}
	p := params{}.u(W.Rows, W.Cols, 1, int(W.DType), W.Off, W.Stride, r.srcs.Off, r.srcs.Stride, out.Off, W.Rows, 1, 0).
		u(0, 0, 1, 0, 0, 0, 0, 0).u(0, 0).f(0).u(0, 0, 0).u(0).f(0, 0).u(0, 0, 0, 0).
		u(r.nsrc, r.w.Off, r.gamma.Off, r.norm.Off).f(r.eps, r.normEps).u(r.out.Off)
	groups := d.resGroups(W.Rows)
	blocks := (d.gemvGroups(W.Rows) + groups - 1) / groups
	p = p.u(blocks)
	return d.dispatch(k, p, []*Buffer{W.Buf, r.srcs.Buf, out.Buf, r.w.Buf, r.out.Buf, r.gamma.Buf, r.norm.Buf}, (d.gemvGroups(W.Rows)+blocks-1)/blocks)
}

func (d *Device) checkAttnRes(out Strided, srcs Strided, tokStride, nsrc, n, T int, w, gamma View) error {
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
	return gamma.check(n, "AttnRes gamma")
}

func (d *Device) attnRes(out Strided, srcs Strided, tokStride, nsrc, n, T int, w, gamma View, eps float32, norm View, normEps float32) error {
	if err := d.checkAttnRes(out, srcs, tokStride, nsrc, n, T, w, gamma); err != nil {
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
