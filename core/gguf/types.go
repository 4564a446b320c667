package gguf

import (
	"fmt"
	"math"
	"math/bits"
)

// GGMLType is a ggml tensor element type as stored in a GGUF tensor info
// (enum ggml_type).
type GGMLType uint32

// The ggml types tessera knows. Numbers are ggml's; 4, 5 and 31–33, 36–38
// were removed from ggml and are not valid in a GGUF file.
const (
	TypeF32     GGMLType = 0
	TypeF16     GGMLType = 1
	TypeQ4_0    GGMLType = 2
	TypeQ4_1    GGMLType = 3
	TypeQ5_0    GGMLType = 6
	TypeQ5_1    GGMLType = 7
	TypeQ8_0    GGMLType = 8
	TypeQ8_1    GGMLType = 9
	TypeQ2_K    GGMLType = 10
	TypeQ3_K    GGMLType = 11
	TypeQ4_K    GGMLType = 12
	TypeQ5_K    GGMLType = 13
	TypeQ6_K    GGMLType = 14
	TypeQ8_K    GGMLType = 15
	TypeIQ2_XXS GGMLType = 16
	TypeIQ2_XS  GGMLType = 17
	TypeIQ3_XXS GGMLType = 18
	TypeIQ1_S   GGMLType = 19
	TypeIQ4_NL  GGMLType = 20
	TypeIQ3_S   GGMLType = 21
	TypeIQ2_S   GGMLType = 22
	TypeIQ4_XS  GGMLType = 23
	TypeI8      GGMLType = 24
	TypeI16     GGMLType = 25
	TypeI32     GGMLType = 26
	TypeI64     GGMLType = 27
	TypeF64     GGMLType = 28
	TypeIQ1_M   GGMLType = 29
	TypeBF16    GGMLType = 30
	TypeTQ1_0   GGMLType = 34
	TypeTQ2_0   GGMLType = 35
	TypeMXFP4   GGMLType = 39
	TypeNVFP4   GGMLType = 40
	TypeQ1_0    GGMLType = 41
	TypeQ2_0    GGMLType = 42
)

// qkK is the K-quant super-block size (QK_K).
const qkK = 256

// typeInfo is one ggml type's storage: blockSize elements take typeSize
// bytes (ggml's type_traits blck_size / type_size).
type typeInfo struct {
	name      string
	blockSize uint64
	typeSize  uint64
}

// typeTable follows ggml's type traits (gguf-py GGML_QUANT_SIZES).
var typeTable = map[GGMLType]typeInfo{
	TypeF32:     {"F32", 1, 4},
	TypeF16:     {"F16", 1, 2},
	TypeQ4_0:    {"Q4_0", 32, 2 + 16},
	TypeQ4_1:    {"Q4_1", 32, 2 + 2 + 16},
	TypeQ5_0:    {"Q5_0", 32, 2 + 4 + 16},
	TypeQ5_1:    {"Q5_1", 32, 2 + 2 + 4 + 16},
	TypeQ8_0:    {"Q8_0", 32, 2 + 32},
	TypeQ8_1:    {"Q8_1", 32, 4 + 4 + 32},
	TypeQ2_K:    {"Q2_K", qkK, 2 + 2 + qkK/16 + qkK/4},
	TypeQ3_K:    {"Q3_K", qkK, 2 + qkK/4 + qkK/8 + 12},
	TypeQ4_K:    {"Q4_K", qkK, 2 + 2 + qkK/2 + 12},
	TypeQ5_K:    {"Q5_K", qkK, 2 + 2 + qkK/2 + qkK/8 + 12},
	TypeQ6_K:    {"Q6_K", qkK, 2 + qkK/2 + qkK/4 + qkK/16},
	TypeQ8_K:    {"Q8_K", qkK, 4 + qkK + qkK/8},
	TypeIQ2_XXS: {"IQ2_XXS", qkK, 2 + qkK/4},
	TypeIQ2_XS:  {"IQ2_XS", qkK, 2 + qkK/4 + qkK/32},
	TypeIQ3_XXS: {"IQ3_XXS", qkK, 2 + qkK/4 + qkK/8},
	TypeIQ1_S:   {"IQ1_S", qkK, 2 + qkK/8 + qkK/16},
	TypeIQ4_NL:  {"IQ4_NL", 32, 2 + 16},
	TypeIQ3_S:   {"IQ3_S", qkK, 2 + qkK/4 + qkK/8 + qkK/32 + 4},
	TypeIQ2_S:   {"IQ2_S", qkK, 2 + qkK/4 + qkK/16},
	TypeIQ4_XS:  {"IQ4_XS", qkK, 2 + 2 + qkK/2 + qkK/64},
	TypeI8:      {"I8", 1, 1},
	TypeI16:     {"I16", 1, 2},
	TypeI32:     {"I32", 1, 4},
	TypeI64:     {"I64", 1, 8},
	TypeF64:     {"F64", 1, 8},
	TypeIQ1_M:   {"IQ1_M", qkK, qkK/8 + qkK/16 + qkK/32},
	TypeBF16:    {"BF16", 1, 2},
	TypeTQ1_0:   {"TQ1_0", qkK, 2 + 4*13},
	TypeTQ2_0:   {"TQ2_0", qkK, 2 + 64},
	TypeMXFP4:   {"MXFP4", 32, 1 + 16},
	TypeNVFP4:   {"NVFP4", 64, 4 + 32},
	TypeQ1_0:    {"Q1_0", 128, 2 + 16},
	TypeQ2_0:    {"Q2_0", 64, 2 + 16},
}

// String names the type as ggml does ("Q8_0"), or "type(N)" if unknown.
func (t GGMLType) String() string {
	if ti, ok := typeTable[t]; ok {
		return ti.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// Known reports whether t is a ggml type tessera knows the storage of.
func (t GGMLType) Known() bool {
	_, ok := typeTable[t]
	return ok
}

// BlockSize is the number of elements in one block of t (1 for plain
// types); 0 if t is unknown.
func (t GGMLType) BlockSize() uint64 { return typeTable[t].blockSize }

// TypeSize is the number of bytes of one block of t; 0 if t is unknown.
func (t GGMLType) TypeSize() uint64 { return typeTable[t].typeSize }

// ParseType reads a ggml type name ("F32", "q8_0", …), case-insensitive.
func ParseType(s string) (GGMLType, error) {
	for t, ti := range typeTable {
		if equalFold(ti.name, s) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown ggml type %q", s)
}

func equalFold(a, b string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		x, y := a[i], b[i]
		if 'a' <= x && x <= 'z' {
			x -= 'a' - 'A'
		}
		if 'a' <= y && y <= 'z' {
			y -= 'a' - 'A'
		}
		if x != y {
			return false
		}
	}
	return true
}

// MaxDims is ggml's GGML_MAX_DIMS.
const MaxDims = 4

// TensorBytes is the storage size of a tensor of type t and shape ne
// (ggml order: ne[0] varies fastest). It checks what ggml checks: t is
// known, 1 ≤ len(ne) ≤ 4, ne[0] is a multiple of the block size, and the
// element count and byte size fit in an int64.
func TensorBytes(t GGMLType, ne []uint64) (uint64, error) {
	ti, ok := typeTable[t]
	if !ok {
		return 0, fmt.Errorf("unknown ggml type %d", uint32(t))
	}
	if len(ne) == 0 || len(ne) > MaxDims {
		return 0, fmt.Errorf("%d dimensions (want 1..%d)", len(ne), MaxDims)
	}
	n := uint64(1)
	for _, d := range ne {
		if d > math.MaxInt64 {
			return 0, fmt.Errorf("dimension %d is too large", d)
		}
		hi, lo := bits.Mul64(n, d)
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v has more than 2^63 elements", ne)
		}
		n = lo
	}
	if ne[0]%ti.blockSize != 0 {
		return 0, fmt.Errorf("shape %v: ne[0]=%d is not a multiple of %s's block size %d", ne, ne[0], ti.name, ti.blockSize)
	}
	hi, size := bits.Mul64(n/ti.blockSize, ti.typeSize)
	if hi != 0 || size > math.MaxInt64 {
		return 0, fmt.Errorf("shape %v of %s is larger than 2^63 bytes", ne, ti.name)
	}
	return size, nil
}
