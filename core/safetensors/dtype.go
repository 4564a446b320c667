package safetensors

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/tessera-llm/tessera/core/half"
)

// DType is a safetensors element type, spelled as in the file header.
type DType string

// The element types defined by the safetensors format. Only F32, F16, BF16
// and F64 can be converted to float32; the others are parsed and their sizes
// validated so that headers of real checkpoints load, and their raw bytes are
// available through Checkpoint.Bytes.
const (
	BOOL    DType = "BOOL"
	U8      DType = "U8"
	I8      DType = "I8"
	U16     DType = "U16"
	I16     DType = "I16"
	U32     DType = "U32"
	I32     DType = "I32"
	U64     DType = "U64"
	I64     DType = "I64"
	F16     DType = "F16"
	BF16    DType = "BF16"
	F32     DType = "F32"
	F64     DType = "F64"
	C64     DType = "C64"
	F8E4M3  DType = "F8_E4M3"
	F8E5M2  DType = "F8_E5M2"
	F8E8M0  DType = "F8_E8M0"
	F6E2M3  DType = "F6_E2M3"
	F6E3M2  DType = "F6_E3M2"
	F4      DType = "F4"
	invalid DType = ""
)

var dtypeBits = map[DType]int{
	BOOL: 8, U8: 8, I8: 8, F8E4M3: 8, F8E5M2: 8, F8E8M0: 8,
	U16: 16, I16: 16, F16: 16, BF16: 16,
	U32: 32, I32: 32, F32: 32,
	U64: 64, I64: 64, F64: 64, C64: 64,
	F6E2M3: 6, F6E3M2: 6, F4: 4,
}

// ParseDType returns the DType for a header spelling such as "BF16", or an
// error if the name is not a safetensors element type.
func ParseDType(s string) (DType, error) {
	d := DType(s)
	if _, ok := dtypeBits[d]; !ok {
		return invalid, fmt.Errorf("unknown dtype %q", s)
	}
	return d, nil
}

// Valid reports whether d is a known safetensors element type.
func (d DType) Valid() bool {
	_, ok := dtypeBits[d]
	return ok
}

// Bits returns the size of one element in bits (4 for F4, 6 for F6_*), or 0
// for an unknown dtype.
func (d DType) Bits() int { return dtypeBits[d] }

// ElemSize returns the size of one element in bytes. It returns 0 for unknown
// dtypes and for the sub-byte types F4, F6_E2M3 and F6_E3M2 (see Bits).
func (d DType) ElemSize() int {
	b := dtypeBits[d]
	if b%8 != 0 {
		return 0
	}
	return b / 8
}

// ConvertibleToFloat32 reports whether Checkpoint.Float32 supports d.
func (d DType) ConvertibleToFloat32() bool {
	switch d {
	case F32, F16, BF16, F64:
		return true
	}
	return false
}

// byteSize returns the number of bytes that numel elements of d occupy.
func (d DType) byteSize(numel int64) (int64, error) {
	bits := int64(d.Bits())
	if bits == 0 {
		return 0, fmt.Errorf("unknown dtype %q", string(d))
	}
	if numel > math.MaxInt64/bits {
		return 0, fmt.Errorf("%d elements of %s overflow int64 bytes", numel, d)
	}
	total := numel * bits
	if total%8 != 0 {
		return 0, fmt.Errorf("%d elements of %d-bit %s are not a whole number of bytes", numel, bits, d)
	}
	return total / 8, nil
}

// decodeFloat32 converts little-endian elements of d in src into dst.
// len(src) must equal len(dst)*d.ElemSize().
func decodeFloat32(d DType, dst []float32, src []byte) {
	switch d {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(src[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = half.F16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = half.BF16ToF32(binary.LittleEndian.Uint16(src[2*i:]))
		}
	case F64:
		for i := range dst {
			dst[i] = float32(math.Float64frombits(binary.LittleEndian.Uint64(src[8*i:])))
		}
	}
}
