// Package tensor holds the host-side storage of weights: a row-major matrix
// whose elements are float32, IEEE float16 or bfloat16. Half-precision
// matrices stay in half precision in memory (and may alias a memory-mapped
// checkpoint); rows are widened to float32 only when an op reads them.
package tensor

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/half"
)

// DType is the element type of a Mat.
type DType uint8

// The element types a Mat can hold.
const (
	F32 DType = iota
	F16
	BF16
	// Q8 is symmetric int8 with one float32 scale per row:
	// W[r, c] = Scale[r] · I8[r·Cols + c] (compressed-tensors "int-quantized",
	// channel strategy).
	Q8
	// Block formats of ggml (blocks.go), stored as raw blocks in Mat.Q.
	Q8_0  // block_q8_0: 32 int8 and an fp16 scale
	Q4_0  // block_q4_0: 32 4-bit values offset by 8 and an fp16 scale
	Q4K   // block_q4_K: 256 4-bit values, 8 sub-blocks with 6-bit scales and mins
	Q5K   // block_q5_K: as Q4_K with a fifth bit per value
	Q6K   // block_q6_K: 256 6-bit values, 16 int8 sub-block scales
	MXFP4 // block_mxfp4: 32 E2M1 values and an E8M0 scale
	Q4_1  // block_q4_1: 32 4-bit values, an fp16 scale and an fp16 min
	Q5_0  // block_q5_0: 32 5-bit values offset by 16 and an fp16 scale
	Q5_1  // block_q5_1: 32 5-bit values, an fp16 scale and an fp16 min
)

// String returns the safetensors spelling of the type.
func (d DType) String() string {
	switch d {
	case F32:
		return "F32"
	case F16:
		return "F16"
	case BF16:
		return "BF16"
	case Q8:
		return "Q8"
	case Q8_0:
		return "Q8_0"
	case Q4_0:
		return "Q4_0"
	case Q4K:
		return "Q4_K"
	case Q5K:
		return "Q5_K"
	case Q6K:
		return "Q6_K"
	case MXFP4:
		return "MXFP4"
	case Q4_1:
		return "Q4_1"
	case Q5_0:
		return "Q5_0"
	case Q5_1:
		return "Q5_1"
	}
	return fmt.Sprintf("DType(%d)", uint8(d))
}

// Size is the number of bytes of one element (Q8: without its row scale;
// block formats: 0, see BlockBytes).
func (d DType) Size() int {
	switch d {
	case F32:
		return 4
	case Q8:
		return 1
	case F16, BF16:
		return 2
	}
	return 0
}

// Mat is a Rows×Cols row-major matrix. Exactly one of F32, U16, I8 and Q
// is set: F32 for DType F32, U16 (raw bits) for F16 and BF16, I8 with Scale
// (one per row) for Q8, Q (raw ggml blocks, row after row) for the block
// formats. A linear layer's weight W ∈ R^{out×in} is stored
// with Rows = out, Cols = in, as in PyTorch.
//
// A deferred matrix (model.LoadDeferred) has its shape and dtype but no
// data: Fetch reads it from the checkpoint each time it is called, and
// Resolve returns the loaded form without keeping it, so a GPU upload
// holds one matrix in memory at a time.
type Mat struct {
	Rows, Cols int
	DType      DType
	F32        []float32
	U16        []uint16
	I8         []int8
	Scale      []float32
	Q          []byte
	Fetch      func() (*Mat, error)
}

// Deferred reports whether m's data is not in memory (see Fetch).
func (m *Mat) Deferred() bool { return m != nil && m.Fetch != nil }

// Resolve returns m with its data: m itself, or what Fetch reads.
func (m *Mat) Resolve() (*Mat, error) {
	if !m.Deferred() {
		return m, nil
	}
	r, err := m.Fetch()
	if err != nil {
		return nil, err
	}
	if r.Rows != m.Rows || r.Cols != m.Cols || r.DType != m.DType || r.Deferred() {
		return nil, fmt.Errorf("tensor: deferred %dx%d %v matrix fetched as %dx%d %v", m.Rows, m.Cols, m.DType, r.Rows, r.Cols, r.DType)
	}
	return r, nil
}

// NewQ8 wraps int8 data (len rows*cols) with per-row scales (len rows).
func NewQ8(rows, cols int, data []int8, scale []float32) *Mat {
	if len(data) != rows*cols || len(scale) != rows {
		panic(fmt.Sprintf("tensor: NewQ8 %dx%d with %d values and %d scales", rows, cols, len(data), len(scale)))
	}
	return &Mat{Rows: rows, Cols: cols, DType: Q8, I8: data, Scale: scale}
}

// Quantize returns m as Q8: per row, scale = max|W[r,:]| / 127 and
// I8 = round(W / scale) (symmetric, round half away from zero).
func Quantize(m *Mat) *Mat {
	w := m.Float32()
	q := make([]int8, len(w))
	sc := make([]float32, m.Rows)
	for r := 0; r < m.Rows; r++ {
		row := w[r*m.Cols : (r+1)*m.Cols]
		var mx float32
		for _, v := range row {
			mx = max(mx, v, -v)
		}
		if mx == 0 {
			continue
		}
		s := mx / 127
		sc[r] = s
		for c, v := range row {
			x := v / s
			if x >= 0 {
				x += 0.5
			} else {
				x -= 0.5
			}
			q[r*m.Cols+c] = int8(max(-127, min(127, int32(x))))
		}
	}
	return NewQ8(m.Rows, m.Cols, q, sc)
}

// NewF32 wraps data (len rows*cols) as a float32 matrix.
func NewF32(rows, cols int, data []float32) *Mat {
	if len(data) != rows*cols {
		panic(fmt.Sprintf("tensor: NewF32 %dx%d with %d values", rows, cols, len(data)))
	}
	return &Mat{Rows: rows, Cols: cols, DType: F32, F32: data}
}

// NewHalf wraps raw 16-bit data (len rows*cols) as an F16 or BF16 matrix.
func NewHalf(rows, cols int, dt DType, data []uint16) *Mat {
	if len(data) != rows*cols || dt == F32 {
		panic(fmt.Sprintf("tensor: NewHalf %dx%d %v with %d values", rows, cols, dt, len(data)))
	}
	return &Mat{Rows: rows, Cols: cols, DType: dt, U16: data}
}

// Row writes row i widened to float32 into dst (len ≥ Cols) and returns
// dst[:Cols]. For F32 matrices it returns the stored row without copying.
func (m *Mat) Row(i int, dst []float32) []float32 {
	lo, hi := i*m.Cols, (i+1)*m.Cols
	switch m.DType {
	case F32:
		return m.F32[lo:hi]
	case F16:
		half.DecodeF16(dst[:m.Cols], m.U16[lo:hi])
	case BF16:
		half.DecodeBF16(dst[:m.Cols], m.U16[lo:hi])
	case Q8:
		s := m.Scale[i]
		for c, v := range m.I8[lo:hi] {
			dst[c] = s * float32(v)
		}
	default:
		rb := m.DType.RowBytes(m.Cols)
		Dequantize(m.DType, dst[:m.Cols], m.Q[i*rb:(i+1)*rb])
	}
	return dst[:m.Cols]
}

// Float32 returns all elements widened to float32 (a copy for half types,
// the stored slice for F32).
func (m *Mat) Float32() []float32 {
	if m.DType == F32 {
		return m.F32
	}
	out := make([]float32, m.Rows*m.Cols)
	switch m.DType {
	case F16:
		half.DecodeF16(out, m.U16)
	case BF16:
		half.DecodeBF16(out, m.U16)
	default:
		for r := 0; r < m.Rows; r++ {
			m.Row(r, out[r*m.Cols:(r+1)*m.Cols])
		}
	}
	return out
}

// Bytes is the storage size of the matrix in bytes (Q8: with its scales).
func (m *Mat) Bytes() int64 {
	if m.DType.Blocked() {
		return int64(m.Rows) * int64(m.DType.RowBytes(m.Cols))
	}
	n := int64(m.Rows) * int64(m.Cols) * int64(m.DType.Size())
	if m.DType == Q8 {
		n += 4 * int64(m.Rows)
	}
	return n
}

// SliceRows returns rows [lo, hi) as a matrix sharing storage with m.
func (m *Mat) SliceRows(lo, hi int) *Mat {
	s := &Mat{Rows: hi - lo, Cols: m.Cols, DType: m.DType}
	switch m.DType {
	case F32:
		s.F32 = m.F32[lo*m.Cols : hi*m.Cols]
	case Q8:
		s.I8, s.Scale = m.I8[lo*m.Cols:hi*m.Cols], m.Scale[lo:hi]
	case F16, BF16:
		s.U16 = m.U16[lo*m.Cols : hi*m.Cols]
	default:
		rb := m.DType.RowBytes(m.Cols)
		s.Q = m.Q[lo*rb : hi*rb]
	}
	return s
}
