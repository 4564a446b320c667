//go:build js && wasm && !purego

package ref

import (
	_ "embed"
	"math"
	"runtime"
	"sync"
	"syscall/js"
	"unsafe"

	"github.com/tessera-llm/tessera/core/tensor"
)

// simd128Wasm is the SIMD128 kernel module (simd128/kernels.wat, generated
// by scripts/gen/simd128.py).
//
//go:embed simd128/kernels.wasm
var simd128Wasm []byte

// simd128 holds the instantiated kernel module: its exports bound to the
// address of simd128Params, so a call passes nothing through JS — rows,
// gemm and kda (float products, the KDA decode step), qrows and quant
// (the block formats' integer path) and the chunked KDA's row-block
// helpers.
var simd128 struct {
	once                       sync.Once
	ok                         bool
	reason                     string
	rows, gemm, kda            js.Value
	qrows, quant               js.Value
	axpyRows, mulRows, dotRows js.Value
}

// simd128Params is the parameter block the kernels read (kernels.wat).
// js/wasm runs one goroutine at a time and nothing between filling it and
// the call can switch goroutines, so one block serves every caller.
var simd128Params [15]int32

// SIMD128 reports whether matrix-vector products run in the WebAssembly
// SIMD128 kernel module, and if not, why.
func SIMD128() (bool, string) {
	simd128.once.Do(simd128Init)
	return simd128.ok, simd128.reason
}

// simd128Init instantiates the kernel module on the memory of this Go
// instance (globalThis.wasm.instance.exports.mem, which the worker and
// scripts/wasm/node-exec.js set). Without it, or without SIMD128 in the
// engine, the pure-Go kernels run.
func simd128Init() {
	defer func() {
		if e := recover(); e != nil {
			simd128.ok, simd128.reason = false, "the kernel module could not be instantiated"
		}
	}()
	g := js.Global()
	wa := g.Get("WebAssembly")
	if wa.IsUndefined() {
		simd128.reason = "no WebAssembly object"
		return
	}
	inst := g.Get("wasm")
	if inst.IsUndefined() || inst.Get("instance").IsUndefined() {
		simd128.reason = "globalThis.wasm (this instance) is not set"
		return
	}
	mem := inst.Get("instance").Get("exports").Get("mem")
	buf := g.Get("Uint8Array").New(len(simd128Wasm))
	js.CopyBytesToJS(buf, simd128Wasm)
	if !wa.Call("validate", buf).Bool() {
		simd128.reason = "this engine has no WebAssembly SIMD128"
		return
	}
	mod := wa.Get("Module").New(buf)
	ki := wa.Get("Instance").New(mod, map[string]any{"env": map[string]any{"mem": mem}})
	p := addr32(unsafe.Pointer(&simd128Params[0]))
	simd128.rows = ki.Get("exports").Get("rows").Call("bind", js.Null(), p)
	simd128.gemm = ki.Get("exports").Get("gemm").Call("bind", js.Null(), p)
	simd128.kda = ki.Get("exports").Get("kda").Call("bind", js.Null(), p)
	simd128.qrows = ki.Get("exports").Get("qrows").Call("bind", js.Null(), p)
	simd128.quant = ki.Get("exports").Get("quant").Call("bind", js.Null(), p)
	simd128.axpyRows = ki.Get("exports").Get("axpyrows").Call("bind", js.Null(), p)
	simd128.mulRows = ki.Get("exports").Get("mulrows").Call("bind", js.Null(), p)
	simd128.dotRows = ki.Get("exports").Get("dotrows").Call("bind", js.Null(), p)
	simd128.ok, simd128.reason = true, "WebAssembly SIMD128 kernels"
}

// addr32 is p's offset in this instance's linear memory.
func addr32(p unsafe.Pointer) int32 { return int32(uintptr(p)) }

// simdRowsDot is rowsDot for F32, F16, BF16 and Q8 rows in the SIMD128
// module: out[o-lo] = W[o,:]·x for lo ≤ o < hi. It reports false (and does
// nothing) where the module is not available or W's dtype has no kernel.
func simdRowsDot(W *tensor.Mat, lo, hi int, x, out []float32) bool {
	if !simdParams(W, lo, hi, x[:W.Cols], out[:hi-lo]) {
		return false
	}
	simd128.rows.Invoke()
	runtime.KeepAlive(W)
	runtime.KeepAlive(x)
	runtime.KeepAlive(out)
	return true
}

// simdGemm is Linear's T-token product for rows [lo, hi) of W in the
// SIMD128 module: out[t·ldo + o] = W[o,:]·x[t·W.Cols:] for t < T, with the
// bits simdRowsDot gives each token alone.
func simdGemm(W *tensor.Mat, lo, hi int, x []float32, T int, out []float32, ldo int) bool {
	if T < 1 || !simdParams(W, lo, hi, x[:T*W.Cols], out[lo:(T-1)*ldo+hi]) {
		return false
	}
	simd128Params[7], simd128Params[8] = int32(T), int32(ldo)
	simd128.gemm.Invoke()
	runtime.KeepAlive(W)
	runtime.KeepAlive(x)
	runtime.KeepAlive(out)
	return true
}

// simdParams fills the parameter block for rows [lo, hi) of W, the
// activations x and the first output out[0]; false where the module is
// unavailable or has no kernel for W.
func simdParams(W *tensor.Mat, lo, hi int, x, out []float32) bool {
	n := W.Cols
	if hi <= lo || n == 0 {
		return false
	}
	if ok, _ := SIMD128(); !ok {
		return false
	}
	p := &simd128Params
	switch W.DType {
	case tensor.F32:
		p[0], p[1] = 0, addr32(unsafe.Pointer(&W.F32[lo*n : hi*n][0]))
	case tensor.F16:
		p[0], p[1] = 1, addr32(unsafe.Pointer(&W.U16[lo*n : hi*n][0]))
	case tensor.BF16:
		p[0], p[1] = 2, addr32(unsafe.Pointer(&W.U16[lo*n : hi*n][0]))
	case tensor.Q8:
		p[0], p[1] = 3, addr32(unsafe.Pointer(&W.I8[lo*n : hi*n][0]))
		p[6] = addr32(unsafe.Pointer(&W.Scale[lo:hi][0]))
	default:
		return false
	}
	p[2], p[3], p[4], p[5] = addr32(unsafe.Pointer(&x[0])), int32(n), addr32(unsafe.Pointer(&out[0])), int32(hi-lo)
	return true
}

// useSIMD128 reports whether the module has a kernel for W's dtype.
func useSIMD128(W *tensor.Mat) bool {
	if ok, _ := SIMD128(); !ok {
		return false
	}
	switch W.DType {
	case tensor.F32, tensor.F16, tensor.BF16, tensor.Q8:
		return true
	}
	return false
}

// simdKDAStep is kdaStep (one KDA decode step of one head) in the SIMD128
// module, with the bits of kdaStepGeneric: each element gets the same
// operations in the same order. False where the module is unavailable or
// dv is not a multiple of 4.
func simdKDAStep(S, k, q, e, v, o []float32, beta float32) bool {
	dk, dv := len(k), len(v)
	if dk == 0 || dv == 0 || dv%4 != 0 {
		return false
	}
	if ok, _ := SIMD128(); !ok {
		return false
	}
	S, q, e, o = S[:dk*dv], q[:dk], e[:dk], o[:dv]
	p := &simd128Params
	p[0], p[1], p[2] = addr32(unsafe.Pointer(&S[0])), addr32(unsafe.Pointer(&k[0])), addr32(unsafe.Pointer(&q[0]))
	p[3], p[4], p[5] = addr32(unsafe.Pointer(&e[0])), addr32(unsafe.Pointer(&v[0])), addr32(unsafe.Pointer(&o[0]))
	p[6], p[7], p[8] = int32(dk), int32(dv), int32(math.Float32bits(beta))
	simd128.kda.Invoke()
	runtime.KeepAlive(S)
	runtime.KeepAlive(k)
	runtime.KeepAlive(q)
	runtime.KeepAlive(e)
	runtime.KeepAlive(v)
	runtime.KeepAlive(o)
	return true
}

// simdQ8Format is the module's number of each block format with an
// integer kernel (kernels.wat, qrows).
var simdQ8Format = map[tensor.DType]int32{
	tensor.Q8_0: 0, tensor.Q4_0: 1, tensor.Q5_0: 2, tensor.MXFP4: 3, tensor.Q4K: 4, tensor.Q6K: 5,
}

// useSIMDQ8 reports whether the integer path of dt runs in the SIMD128
// module.
func useSIMDQ8(dt tensor.DType) bool {
	if ok, _ := SIMD128(); !ok || !simdQ8On {
		return false
	}
	_, ok := simdQ8Format[dt]
	return ok
}

// simdQ8 is q8Generic in the SIMD128 module for rows [lo, hi) of W and
// tokens t0 … t0+T−1 of a: out[u·ldo + o−lo] = rowDotQ8(W, o, a, t0+u, 0,
// a.kernelBlocks()), with the generic kernels' bits. False (and nothing
// done) where the module is unavailable or has no kernel for W.
func simdQ8(W *tensor.Mat, lo, hi int, a *actQ8, t0, T int, out []float32, ldo int) bool {
	if hi <= lo || T < 1 || !useSIMDQ8(W.DType) {
		return false
	}
	units := a.units
	if a.kind == act32 {
		units = a.kernelBlocks() / 2
	}
	if units == 0 { // one 32-value block: all of it is the odd one
		for u := range T {
			clear(out[u*ldo : u*ldo+hi-lo])
		}
		return true
	}
	n, nb, rb := a.n, a.blocks(), W.DType.RowBytes(W.Cols)
	w := W.Q[lo*rb : hi*rb]
	q, d, m := a.q[t0*n:(t0+T)*n], a.d[t0*nb:(t0+T)*nb], a.m[t0*a.lm:(t0+T)*a.lm]
	out = out[:(T-1)*ldo+hi-lo]
	p := &simd128Params
	p[0], p[1], p[2], p[3] = simdQ8Format[W.DType], addr32(unsafe.Pointer(&w[0])), int32(rb), int32(hi-lo)
	p[4], p[5], p[6], p[7] = addr32(unsafe.Pointer(&q[0])), int32(n), addr32(unsafe.Pointer(&d[0])), int32(4*nb)
	p[8], p[9], p[10], p[11] = addr32(unsafe.Pointer(&m[0])), int32(4*a.lm), int32(units), int32(T)
	p[12], p[13], p[14] = addr32(unsafe.Pointer(&out[0])), int32(ldo), addr32(unsafe.Pointer(&e8m0Half[0]))
	simd128.qrows.Invoke()
	runtime.KeepAlive(W)
	runtime.KeepAlive(a)
	runtime.KeepAlive(out)
	return true
}

// simdQuantBlocks is quantBlocksGeneric in the SIMD128 module (its bits
// for finite x); false where the module is unavailable or x holds no
// block.
func simdQuantBlocks(x []float32, bl int, q []int8, d []float32, s16 []int32) bool {
	nb := len(x) / bl
	if nb == 0 || bl%16 != 0 || !simdQ8On {
		return false
	}
	if ok, _ := SIMD128(); !ok {
		return false
	}
	q, d, s16 = q[:nb*bl], d[:nb], s16[:nb*bl/16]
	p := &simd128Params
	p[0], p[1], p[2] = addr32(unsafe.Pointer(&x[0])), int32(nb), int32(bl)
	p[3], p[4], p[5] = addr32(unsafe.Pointer(&q[0])), addr32(unsafe.Pointer(&d[0])), addr32(unsafe.Pointer(&s16[0]))
	simd128.quant.Invoke()
	runtime.KeepAlive(x)
	runtime.KeepAlive(q)
	runtime.KeepAlive(d)
	runtime.KeepAlive(s16)
	return true
}

// simdRowsMin is the fewest values (rows × columns) a row-block helper
// takes to the module: below it the call costs more than it saves.
const simdRowsMin = 256

// simdRowsCall runs the module's row-block helper f on dst (or out), c (or
// x, or v), R with row stride ld, rows rows of d values; false where the
// module is unavailable or the block is small.
func simdRowsCall(f *js.Value, dst, c, R []float32, ld, rows, d int) bool {
	if rows*d < simdRowsMin || d == 0 {
		return false
	}
	if ok, _ := SIMD128(); !ok {
		return false
	}
	p := &simd128Params
	p[0], p[1] = addr32(unsafe.Pointer(&dst[0])), addr32(unsafe.Pointer(&c[0]))
	p[2], p[3], p[4], p[5] = addr32(unsafe.Pointer(&R[0])), int32(ld), int32(rows), int32(d)
	f.Invoke()
	runtime.KeepAlive(dst)
	runtime.KeepAlive(c)
	runtime.KeepAlive(R)
	return true
}

// simdAxpyRows is axpyRowsGeneric in the module (its bits).
func simdAxpyRows(dst, c, R []float32, ld int) bool {
	d, rows := len(dst), len(c)
	if rows == 0 || d == 0 {
		return false
	}
	return simdRowsCall(&simd128.axpyRows, dst, c, R[:(rows-1)*ld+d], ld, rows, d)
}

// simdMulRows is mulRowsGeneric in the module (its bits).
func simdMulRows(dst, v []float32) bool {
	d := len(v)
	if d == 0 || len(dst) < d {
		return false
	}
	return simdRowsCall(&simd128.mulRows, dst, v, dst, d, len(dst)/d, d)
}

// simdDotRows is dotRowsGeneric in the module (its bits).
func simdDotRows(out, x, R []float32, ld int) bool {
	d, rows := len(x), len(out)
	if rows == 0 || d == 0 {
		return false
	}
	return simdRowsCall(&simd128.dotRows, out, x, R[:(rows-1)*ld+d], ld, rows, d)
}
