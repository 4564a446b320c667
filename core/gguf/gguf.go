// Package gguf reads and writes GGUF files, the single-file model format of
// ggml / llama.cpp (version 3: little-endian, 64-bit counts), and converts a
// tessera model directory into the GGUF layout llama.cpp loads for the
// kimi-k3 and kimi-linear architectures (Export).
//
// The reader is written for untrusted input: every count, length, shape,
// type and offset is checked against the file's size and against Limits
// before anything is allocated, and errors name the key or tensor at fault.
package gguf

import (
	"fmt"
	"math"
)

// Magic is "GGUF" read as a little-endian uint32.
const Magic = 0x46554747

// Version is the GGUF version the writer produces. The reader accepts
// versions 2 and 3, which share the encoding.
const Version = 3

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides DefaultAlignment.
const KeyAlignment = "general.alignment"

// ValueType is a GGUF metadata value type (enum gguf_type).
type ValueType uint32

// GGUF metadata value types.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var valueTypeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String names the type as the GGUF specification does.
func (t ValueType) String() string {
	if int(t) < len(valueTypeNames) {
		return valueTypeNames[t]
	}
	return fmt.Sprintf("value_type(%d)", uint32(t))
}

// scalarSize is the encoded size of a fixed-size value type (0 for
// string, array and unknown types).
func (t ValueType) scalarSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// KV is one metadata entry. Value holds one of the Go types that map to
// GGUF value types: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64, or a slice of one of them
// ([]uint8 … []string) for a GGUF array. Arrays of arrays are not
// supported (llama.cpp does not read them either).
type KV struct {
	Key   string
	Value any
}

// TypeOf returns the GGUF type of a Go value, and for a slice the element
// type; ok is false for a Go type GGUF cannot hold.
func TypeOf(v any) (t, elem ValueType, ok bool) {
	switch v.(type) {
	case uint8:
		return TypeUint8, 0, true
	case int8:
		return TypeInt8, 0, true
	case uint16:
		return TypeUint16, 0, true
	case int16:
		return TypeInt16, 0, true
	case uint32:
		return TypeUint32, 0, true
	case int32:
		return TypeInt32, 0, true
	case float32:
		return TypeFloat32, 0, true
	case bool:
		return TypeBool, 0, true
	case string:
		return TypeString, 0, true
	case uint64:
		return TypeUint64, 0, true
	case int64:
		return TypeInt64, 0, true
	case float64:
		return TypeFloat64, 0, true
	case []uint8:
		return TypeArray, TypeUint8, true
	case []int8:
		return TypeArray, TypeInt8, true
	case []uint16:
		return TypeArray, TypeUint16, true
	case []int16:
		return TypeArray, TypeInt16, true
	case []uint32:
		return TypeArray, TypeUint32, true
	case []int32:
		return TypeArray, TypeInt32, true
	case []float32:
		return TypeArray, TypeFloat32, true
	case []bool:
		return TypeArray, TypeBool, true
	case []string:
		return TypeArray, TypeString, true
	case []uint64:
		return TypeArray, TypeUint64, true
	case []int64:
		return TypeArray, TypeInt64, true
	case []float64:
		return TypeArray, TypeFloat64, true
	}
	return 0, 0, false
}

// MaxNameLen is the longest tensor name ggml stores (GGML_MAX_NAME − 1).
const MaxNameLen = 63

// Limits bound what the reader accepts, so that a hostile header cannot
// make it allocate without bound. The zero value means DefaultLimits.
type Limits struct {
	MaxKVs       uint64 // metadata entries
	MaxTensors   uint64 // tensor infos
	MaxString    uint64 // bytes in one string (key, value or array element)
	MaxArray     uint64 // elements in one array
	MaxAlignment uint32 // general.alignment
}

// DefaultLimits are far above any real model (a 256K-token vocabulary is
// one array of 2^18 strings) and small enough to be safe.
var DefaultLimits = Limits{
	MaxKVs:       1 << 16,
	MaxTensors:   1 << 20,
	MaxString:    1 << 26,
	MaxArray:     1 << 24,
	MaxAlignment: 1 << 16,
}

func (l Limits) orDefault() Limits {
	d := DefaultLimits
	if l.MaxKVs != 0 {
		d.MaxKVs = l.MaxKVs
	}
	if l.MaxTensors != 0 {
		d.MaxTensors = l.MaxTensors
	}
	if l.MaxString != 0 {
		d.MaxString = l.MaxString
	}
	if l.MaxArray != 0 {
		d.MaxArray = l.MaxArray
	}
	if l.MaxAlignment != 0 {
		d.MaxAlignment = l.MaxAlignment
	}
	return d
}

// alignUp rounds n up to a multiple of a (a power of two); ok is false on
// overflow.
func alignUp(n, a uint64) (uint64, bool) {
	r := (n + a - 1) &^ (a - 1)
	return r, r >= n && r <= math.MaxInt64
}
