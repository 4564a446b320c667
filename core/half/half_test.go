package half

import (
	"math"
	"math/rand/v2"
	"sort"
	"testing"
)

func isNaN16(h uint16) bool  { return h&0x7c00 == 0x7c00 && h&0x3ff != 0 }
func isNaNBF(b uint16) bool  { return b&0x7f80 == 0x7f80 && b&0x7f != 0 }
func isNaN32(f float32) bool { return f != f }

func TestF16RoundTripExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		if f != f16ToF32Slow(h) && !(isNaN32(f) && isNaN32(f16ToF32Slow(h))) {
			t.Fatalf("table mismatch for %#04x", h)
		}
		back := F32ToF16(f)
		if isNaN16(h) {
			if !isNaN32(f) || !isNaN16(back) {
				t.Fatalf("NaN %#04x: got f32 %v, back %#04x", h, f, back)
			}
			if back&0x8000 != h&0x8000 {
				t.Fatalf("NaN %#04x lost its sign: %#04x", h, back)
			}
			continue
		}
		if back != h {
			t.Fatalf("round trip %#04x → %v → %#04x", h, f, back)
		}
	}
}

func TestF16KnownValues(t *testing.T) {
	tests := []struct {
		h uint16
		f float32
	}{
		{0x0000, 0},
		{0x3c00, 1},
		{0xc000, -2},
		{0x7bff, 65504},
		{0x0400, float32(math.Ldexp(1, -14))},
		{0x0001, float32(math.Ldexp(1, -24))},
		{0x03ff, float32(math.Ldexp(1023, -24))},
		{0x3555, 0.333251953125},
		{0x7c00, float32(math.Inf(1))},
		{0xfc00, float32(math.Inf(-1))},
	}
	for _, tt := range tests {
		if got := F16ToF32(tt.h); got != tt.f {
			t.Errorf("F16ToF32(%#04x) = %v, want %v", tt.h, got, tt.f)
		}
		if got := F32ToF16(tt.f); got != tt.h {
			t.Errorf("F32ToF16(%v) = %#04x, want %#04x", tt.f, got, tt.h)
		}
	}
	if got := F16ToF32(0x8000); got != 0 || !math.Signbit(float64(got)) {
		t.Errorf("F16ToF32(0x8000) = %v, want -0", got)
	}
	if got := F32ToF16(float32(math.Copysign(0, -1))); got != 0x8000 {
		t.Errorf("F32ToF16(-0) = %#04x, want 0x8000", got)
	}
}

// f16Positive lists every finite non-negative fp16 value in increasing order,
// followed by +Inf represented as 2^16 (the value IEEE rounding treats it as).
var f16Positive = func() []float64 {
	v := make([]float64, 0x7c01)
	for i := range 0x7c00 {
		v[i] = float64(f16ToF32Slow(uint16(i)))
	}
	v[0x7c00] = 65536
	return v
}()

// refF32ToF16 is a slow reference: binary search the sorted list of fp16
// magnitudes in float64 and pick the nearest, ties to the even bit pattern.
func refF32ToF16(f float32) uint16 {
	if isNaN32(f) {
		return 0x7e00
	}
	var sign uint16
	x := float64(f)
	if math.Signbit(x) {
		sign = 0x8000
		x = -x
	}
	if math.IsInf(x, 0) || x >= 65536 {
		return sign | 0x7c00
	}
	i := sort.SearchFloat64s(f16Positive, x) // first v[i] >= x
	if f16Positive[i] == x {
		return sign | uint16(i)
	}
	lo, hi := i-1, i
	dlo, dhi := x-f16Positive[lo], f16Positive[hi]-x
	switch {
	case dlo < dhi:
		return sign | uint16(lo)
	case dhi < dlo:
		return sign | uint16(hi)
	case lo%2 == 0:
		return sign | uint16(lo)
	default:
		return sign | uint16(hi)
	}
}

// refF32ToBF16 is a slow reference for bfloat16 rounding using float64.
func refF32ToBF16(f float32) uint16 {
	b := math.Float32bits(f)
	lo := b & 0xffff0000
	hi := lo + 0x10000
	x := math.Abs(float64(f))
	flo := math.Abs(float64(math.Float32frombits(lo)))
	var fhi float64
	if hi&0x7fffffff == 0x7f800000 {
		fhi = math.Ldexp(1, 128)
	} else {
		fhi = math.Abs(float64(math.Float32frombits(hi)))
	}
	dlo, dhi := x-flo, fhi-x
	switch {
	case dlo < dhi:
		return uint16(lo >> 16)
	case dhi < dlo:
		return uint16(hi >> 16)
	case (lo>>16)&1 == 0:
		return uint16(lo >> 16)
	default:
		return uint16(hi >> 16)
	}
}

// edgeFloats returns special and boundary float32 values for both formats.
func edgeFloats() []float32 {
	var v []float32
	add := func(f float64) { v = append(v, float32(f), -float32(f)) }
	for _, f := range []float64{
		0, 1, 0.5, 2, 65504, 65519, 65519.996, 65520, 65536, 1e6, 1e38,
		math.MaxFloat32, math.Inf(1), math.SmallestNonzeroFloat32,
		math.Ldexp(1, -14), math.Ldexp(1, -24), math.Ldexp(1, -25),
		math.Ldexp(1.0000001, -25), math.Ldexp(3, -26), math.Ldexp(1, -26),
		math.Ldexp(1023.5, -24), math.Ldexp(1022.5, -24), math.Ldexp(2047, -25),
		1 + math.Ldexp(1, -11), 1 + math.Ldexp(3, -11), 1 + math.Ldexp(1, -8),
		1 + math.Ldexp(3, -8), 0.1, 1.0 / 3,
	} {
		add(f)
	}
	// float32 neighbours of every fp16 midpoint and of every bf16 midpoint
	// in a range of exponents.
	for i := range 0x7c00 {
		m := float32((float64(f16ToF32Slow(uint16(i))) + f16Positive[i+1]) / 2)
		v = append(v, m, math.Nextafter32(m, 0), math.Nextafter32(m, float32(math.Inf(1))))
	}
	return v
}

func TestF32ToF16MatchesReference(t *testing.T) {
	check := func(f float32) {
		got, want := F32ToF16(f), refF32ToF16(f)
		if isNaN32(f) {
			if !isNaN16(got) {
				t.Fatalf("F32ToF16(NaN %#08x) = %#04x, not NaN", math.Float32bits(f), got)
			}
			return
		}
		if got != want {
			t.Fatalf("F32ToF16(%v [%#08x]) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for _, f := range edgeFloats() {
		check(f)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 2_000_000 {
		check(math.Float32frombits(r.Uint32())) // uniform over bit patterns
	}
	for range 1_000_000 {
		check(float32(r.NormFloat64() * math.Ldexp(1, r.IntN(50)-30))) // concentrated in fp16 range
	}
}

func TestF32ToBF16MatchesReference(t *testing.T) {
	check := func(f float32) {
		got := F32ToBF16(f)
		if isNaN32(f) {
			if !isNaNBF(got) {
				t.Fatalf("F32ToBF16(NaN %#08x) = %#04x, not NaN", math.Float32bits(f), got)
			}
			return
		}
		if want := refF32ToBF16(f); got != want {
			t.Fatalf("F32ToBF16(%v [%#08x]) = %#04x, want %#04x", f, math.Float32bits(f), got, want)
		}
	}
	for _, f := range edgeFloats() {
		check(f)
	}
	for _, b := range []uint32{0x7f800001, 0xff800001, 0x7fc00000, 0x7f800000, 0x7f7fffff, 0x3f808000, 0x3f818000, 0x00008000, 0x00018000} {
		check(math.Float32frombits(b))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 3_000_000 {
		check(math.Float32frombits(r.Uint32()))
	}
}

func TestBF16RoundTripExhaustive(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		b := uint16(i)
		f := BF16ToF32(b)
		back := F32ToBF16(f)
		if isNaNBF(b) {
			if !isNaN32(f) || !isNaNBF(back) || back&0x8000 != b&0x8000 {
				t.Fatalf("NaN %#04x → %#04x", b, back)
			}
			continue
		}
		if back != b {
			t.Fatalf("round trip %#04x → %v → %#04x", b, f, back)
		}
	}
}

func TestBulk(t *testing.T) {
	src := []float32{0, 1, -2.5, 65504, 1e-7, float32(math.Inf(-1)), 3.14159}
	h := make([]uint16, len(src))
	if n := EncodeF16(h, src); n != len(src) {
		t.Fatalf("EncodeF16 n = %d", n)
	}
	dst := make([]float32, len(src))
	if n := DecodeF16(dst, h); n != len(src) {
		t.Fatalf("DecodeF16 n = %d", n)
	}
	for i := range src {
		if h[i] != F32ToF16(src[i]) || dst[i] != F16ToF32(h[i]) {
			t.Errorf("f16 element %d: %#04x %v", i, h[i], dst[i])
		}
	}
	EncodeBF16(h, src)
	DecodeBF16(dst, h)
	for i := range src {
		if h[i] != F32ToBF16(src[i]) || dst[i] != BF16ToF32(h[i]) {
			t.Errorf("bf16 element %d: %#04x %v", i, h[i], dst[i])
		}
	}
	if n := DecodeF16(make([]float32, 3), h); n != 3 {
		t.Errorf("short dst: n = %d, want 3", n)
	}
}

func BenchmarkDecodeF16(b *testing.B) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]float32, len(src))
	b.SetBytes(int64(2 * len(src)))
	for b.Loop() {
		DecodeF16(dst, src)
	}
}

func BenchmarkEncodeF16(b *testing.B) {
	src := make([]float32, 1<<16)
	for i := range src {
		src[i] = float32(i) * 0.37
	}
	dst := make([]uint16, len(src))
	b.SetBytes(int64(4 * len(src)))
	for b.Loop() {
		EncodeF16(dst, src)
	}
}
