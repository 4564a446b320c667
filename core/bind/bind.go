// Package bind binds checkpoint tensors to model fields, for every model
// part (the text model's explicit calls in core/model, the vision tower's
// struct tags): F32, F16 and BF16 tensors of a memory-mapped checkpoint
// are used in place (zero-copy), matrices may be deferred
// (tensor.Mat.Fetch) for a GPU to upload one at a time, and with a nil
// checkpoint a Binder only records the expected names and shapes (a spec,
// what init-random writes); with HeaderOnly it checks a checkpoint from
// its header alone (names, shapes, dtypes), reading no tensor data.
package bind

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"

	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Binder binds checkpoint tensors; the first error stops it (Err).
type Binder struct {
	CK     *safetensors.Checkpoint // nil: record the spec only
	Prefix string                  // prepended to every name
	Used   map[string]bool         // full names bound
	Err    error
	Spec   []TensorSpec
	// Q8: int8 weights with per-row scales are allowed.
	Q8 bool
	// MXFP4, when set, allows compressed-tensors MXFP4 matrices
	// (NAME_packed + NAME_scale in place of NAME) for the modules it
	// reports quantized (config.Config.QuantTargets).
	MXFP4 func(module string) bool
	// Deferred binds matrices without their data.
	Deferred bool
	// HeaderOnly checks without binding: Mat, MatShape, Vec and VecAny
	// make every check a bind makes that the safetensors header can
	// answer (presence, shape, dtype, unused-tensor bookkeeping in Used)
	// but read no tensor data and return nil. A part bound later (the
	// vision tower on its first image) is checked this way at load.
	HeaderOnly bool
}

// New returns a binder over ck (nil: spec only).
func New(ck *safetensors.Checkpoint) *Binder { return &Binder{CK: ck, Used: map[string]bool{}} }

// TensorSpec is one tensor a configuration expects.
type TensorSpec struct {
	Name  string // without the layout prefix
	Shape []int
}

// ShapeError reports a tensor whose shape differs from what the config
// implies.
type ShapeError struct {
	Tensor          string
	Expected, Found []int
}

func (e *ShapeError) Error() string {
	return fmt.Sprintf("tensor %s: expected shape %v, found %v", e.Tensor, e.Expected, e.Found)
}

func (b *Binder) Lookup(name string, shape ...int) *safetensors.Tensor {
	if b.Err != nil {
		return nil
	}
	if b.CK == nil {
		b.Spec = append(b.Spec, TensorSpec{Name: name, Shape: shape})
		return nil
	}
	full := b.Prefix + name
	t, ok := b.CK.Tensor(full)
	if !ok {
		if _, packed := b.CK.Tensor(full + "_packed"); packed {
			b.Err = fmt.Errorf("tensor %s_packed: compressed-tensors MXFP4 weights need their quantization_config (mxfp4-pack-quantized) in config.json", full)
			return nil
		}
		b.Err = fmt.Errorf("tensor %s: missing from checkpoint (expected shape %v)", full, shape)
		return nil
	}
	b.Used[full] = true
	if !slices.Equal(t.Shape, shape) {
		b.Err = &ShapeError{Tensor: full, Expected: shape, Found: t.Shape}
		return nil
	}
	switch t.DType {
	case "F32", "F16", "BF16":
	case "I8":
		if !b.Q8 {
			b.Err = fmt.Errorf("tensor %s: dtype I8 needs a quantization_config (compressed-tensors int8) in config.json", full)
			return nil
		}
	default:
		if _, ok := blockDType(t.DType); ok {
			return t // raw ggml blocks (a GGUF checkpoint); vectors refuse them in vec
		}
		b.Err = fmt.Errorf("tensor %s: dtype %s is not supported (want F32, F16, BF16, or I8 with quantization_config)", full, t.DType)
		return nil
	}
	return t
}

// blockFormats are the ggml block dtypes a checkpoint tensor may have.
var blockFormats = []tensor.DType{tensor.Q8_0, tensor.Q4_0, tensor.Q4_1, tensor.Q5_0, tensor.Q5_1, tensor.Q4K, tensor.Q5K, tensor.Q6K, tensor.MXFP4}

// blockDType maps a checkpoint dtype spelled as tensor.DType.String()
// ("Q4_K") to its block dtype.
func blockDType(d safetensors.DType) (tensor.DType, bool) {
	for _, b := range blockFormats {
		if string(d) == b.String() {
			return b, true
		}
	}
	return 0, false
}

// MatDType is the type a matrix stored as checkpoint dtype d is bound
// as: F32, F16 and BF16 as they are, I8 as Q8 (int8 with row scales), a
// block format spelled as tensor.DType.String() ("Q4_K") as itself. ok is
// false for any other dtype (the binder refuses it at Lookup, except
// MXFP4's packed U8 pair, which binds as MXFP4).
func MatDType(d safetensors.DType) (dt tensor.DType, ok bool) {
	switch d {
	case safetensors.F32:
		return tensor.F32, true
	case safetensors.F16:
		return tensor.F16, true
	case safetensors.BF16:
		return tensor.BF16, true
	case safetensors.I8:
		return tensor.Q8, true
	}
	return blockDType(d)
}

func (b *Binder) Optional(name string) { b.Used[b.Prefix+name] = true }

// Mat binds a [rows, cols] matrix.
func (b *Binder) Mat(name string, rows, cols int) *tensor.Mat { return b.MatShape(name, rows, cols) }

// MatShape binds a tensor of shape [rows, d1, d2, …] as a matrix of rows
// rows of d1·d2·… columns (a conv weight [D, 3, p, p] as [D, 3·p·p]).
func (b *Binder) MatShape(name string, shape ...int) *tensor.Mat {
	if m, ok := b.packedMXFP4(name, shape); ok {
		return m
	}
	t := b.Lookup(name, shape...)
	if t == nil {
		return nil
	}
	rows, cols := shape[0], 1
	for _, d := range shape[1:] {
		cols *= d
	}
	var scale []float32
	if t.DType == "I8" {
		// compressed-tensors: NAME.weight (int8) + NAME.weight_scale [rows, 1].
		if scale = b.VecAny(name+"_scale", rows); b.Err != nil {
			return nil
		}
	}
	if b.HeaderOnly {
		return nil
	}
	ck, full := b.CK, b.Prefix+name
	fetch := func() (*tensor.Mat, error) {
		raw, err := ck.Bytes(full)
		if err != nil {
			return nil, err
		}
		if bt, ok := blockDType(t.DType); ok {
			m, err := tensor.NewBlocked(rows, cols, bt, raw)
			if err != nil {
				return nil, fmt.Errorf("tensor %s: %w", full, err)
			}
			return m, nil
		}
		switch t.DType {
		case "F32":
			return tensor.NewF32(rows, cols, asF32(raw)), nil
		case "I8":
			return tensor.NewQ8(rows, cols, unsafe.Slice((*int8)(unsafe.Pointer(unsafe.SliceData(raw))), len(raw)), scale), nil
		case "F16":
			return tensor.NewHalf(rows, cols, tensor.F16, asU16(raw)), nil
		default:
			return tensor.NewHalf(rows, cols, tensor.BF16, asU16(raw)), nil
		}
	}
	if b.Deferred {
		dt, _ := MatDType(t.DType)
		return &tensor.Mat{Rows: rows, Cols: cols, DType: dt, Fetch: fetch}
	}
	m, err := fetch()
	if err != nil {
		b.Err = err
		return nil
	}
	return m
}

// packedMXFP4 binds matrix name from its compressed-tensors MXFP4 tensors
// (name_packed: uint8 [rows, cols/2], two E2M1 codes a byte; name_scale:
// uint8 [rows, cols/32] E8M0 exponents) as an MXFP4 matrix, repacked into
// ggml's blocks (tensor.MXFP4FromPacked: the same codes and scales, the
// same size). ok is false when the checkpoint stores name itself (or the
// binder does not allow MXFP4); errors go to b.Err.
func (b *Binder) packedMXFP4(name string, shape []int) (m *tensor.Mat, ok bool) {
	if b.Err != nil || b.CK == nil || b.MXFP4 == nil {
		return nil, false
	}
	full := b.Prefix + name
	pname, sname := full+"_packed", full+"_scale"
	if _, plain := b.CK.Tensor(full); plain {
		return nil, false
	}
	pk, has := b.CK.Tensor(pname)
	if !has {
		return nil, false
	}
	b.Used[pname], b.Used[sname] = true, true
	fail := func(format string, args ...any) (*tensor.Mat, bool) {
		b.Err = fmt.Errorf(format, args...)
		return nil, true
	}
	module := strings.TrimSuffix(full, ".weight")
	if !b.MXFP4(module) {
		return fail("tensor %s: quantization_config does not quantize %s (its targets or ignore list leave it in float), but the checkpoint stores it packed", pname, module)
	}
	if len(shape) != 2 || shape[1]%32 != 0 {
		return fail("tensor %s: MXFP4 needs a matrix whose columns are a multiple of 32, the config expects shape %v", pname, shape)
	}
	rows, cols := shape[0], shape[1]
	if pk.DType != safetensors.U8 || !slices.Equal(pk.Shape, []int{rows, cols / 2}) {
		return fail("tensor %s: expected U8 [%d %d] (two E2M1 codes a byte of a %d×%d matrix), found %s %v", pname, rows, cols/2, rows, cols, pk.DType, pk.Shape)
	}
	sc, has := b.CK.Tensor(sname)
	if !has {
		return fail("tensor %s: missing from checkpoint (the E8M0 scales of %s)", sname, pname)
	}
	if (sc.DType != safetensors.U8 && sc.DType != safetensors.F8E8M0) || !slices.Equal(sc.Shape, []int{rows, cols / 32}) {
		return fail("tensor %s: expected U8 [%d %d] (one E8M0 scale per 32 values), found %s %v", sname, rows, cols/32, sc.DType, sc.Shape)
	}
	if b.HeaderOnly {
		return nil, true
	}
	ck := b.CK
	fetch := func() (*tensor.Mat, error) {
		p, err := ck.Bytes(pname)
		if err != nil {
			return nil, err
		}
		s, err := ck.Bytes(sname)
		if err != nil {
			return nil, err
		}
		q, err := tensor.MXFP4FromPacked(p, s, rows, cols)
		if err != nil {
			return nil, fmt.Errorf("tensor %s: %w", pname, err)
		}
		return tensor.NewBlocked(rows, cols, tensor.MXFP4, q)
	}
	if b.Deferred {
		return &tensor.Mat{Rows: rows, Cols: cols, DType: tensor.MXFP4, Fetch: fetch}, true
	}
	m, err := fetch()
	if err != nil {
		b.Err = err
		return nil, true
	}
	return m, true
}

// Vec binds a small tensor of the given shape as float32 (a copy); a
// [1, n] or [m, n] one stored as compressed-tensors MXFP4 (a linear layer
// with one output, such as an AttnRes pseudo-query, that a
// quantization_config targeting every Linear packs) is dequantized.
func (b *Binder) Vec(name string, shape ...int) []float32 {
	if m, ok := b.packedMXFP4(name, shape); ok {
		if m == nil {
			return nil
		}
		if m.Fetch != nil {
			var err error
			if m, err = m.Fetch(); err != nil {
				b.Err = err
				return nil
			}
		}
		v := make([]float32, m.Rows*m.Cols)
		tensor.Dequantize(tensor.MXFP4, v, m.Q)
		return v
	}
	if b.Lookup(name, shape...) == nil {
		return nil
	}
	if b.HeaderOnly {
		if err := b.CK.CheckFloat32(b.Prefix + name); err != nil {
			b.Err = err
		}
		return nil
	}
	v, err := b.CK.Float32(b.Prefix + name)
	if err != nil {
		b.Err = err
	}
	return v
}

// VecAny binds a tensor with n elements whatever its shape; the spec (what
// init-random writes) lists it as [allowed[0]].
func (b *Binder) VecAny(name string, allowed ...int) []float32 {
	return b.VecAnyAs(name, []int{allowed[0]}, allowed...)
}

// VecAnyAs is VecAny with the shape the spec lists (A_log is stored as
// [H], [1,1,H,1] or per channel [H·dk] in different checkpoints).
func (b *Binder) VecAnyAs(name string, specShape []int, allowed ...int) []float32 {
	if b.Err != nil {
		return nil
	}
	if b.CK == nil {
		b.Spec = append(b.Spec, TensorSpec{Name: name, Shape: specShape})
		return nil
	}
	full := b.Prefix + name
	t, ok := b.CK.Tensor(full)
	if !ok {
		b.Err = fmt.Errorf("tensor %s: missing from checkpoint (expected %v elements)", full, allowed)
		return nil
	}
	n := 1
	for _, d := range t.Shape {
		n *= d
	}
	for _, a := range allowed {
		if n == a {
			return b.Vec(name, t.Shape...)
		}
	}
	b.Err = fmt.Errorf("tensor %s: expected %v elements, found shape %v", full, allowed, t.Shape)
	return nil
}

// asF32 views little-endian bytes as float32 without copying when aligned.
func asF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%4 == 0 {
		return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
	}
	out := make([]float32, len(b)/4)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	return out
}

// asU16 views little-endian bytes as uint16 without copying when aligned.
func asU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	if uintptr(unsafe.Pointer(&b[0]))%2 == 0 {
		return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
	}
	out := make([]uint16, len(b)/2)
	copy(unsafe.Slice((*byte)(unsafe.Pointer(&out[0])), len(b)), b)
	return out
}
