//go:build cgo && linux && amd64

package llamacpp

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/tensor"
)

// blockTypes pairs each tessera block dtype with its ggml type.
var blockTypes = []struct {
	g gguf.GGMLType
	t tensor.DType
}{
	{gguf.TypeQ8_0, tensor.Q8_0}, {gguf.TypeQ4_0, tensor.Q4_0}, {gguf.TypeQ4_K, tensor.Q4K},
	{gguf.TypeQ5_K, tensor.Q5K}, {gguf.TypeQ6_K, tensor.Q6K}, {gguf.TypeMXFP4, tensor.MXFP4},
	{gguf.TypeQ4_1, tensor.Q4_1}, {gguf.TypeQ5_0, tensor.Q5_0}, {gguf.TypeQ5_1, tensor.Q5_1},
}

// testRows are rows·perRow values drawn from a few scales per row (and a
// zero row), so blocks see varied ranges, signs and all-zero input.
func testRows(rng *rand.Rand, rows, perRow int) []float32 {
	x := make([]float32, rows*perRow)
	for r := 0; r < rows; r++ {
		if r == 1 {
			continue
		}
		scale := math.Pow(10, float64(rng.IntN(7)-4))
		for i := 0; i < perRow; i++ {
			v := rng.NormFloat64() * scale
			if i%97 == 0 {
				v *= 8 // outliers
			}
			x[r*perRow+i] = float32(v)
		}
	}
	return x
}

// sameBits reports the first index where a and b differ bit for bit.
func sameBits(a, b []float32) (int, bool) {
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i, false
		}
	}
	return 0, len(a) == len(b)
}

// TestDequantizeMatchesGGML quantizes random rows with llama.cpp's
// ggml_quantize_chunk, dequantizes them with ggml's to_float and with
// tessera's dequantizer, and requires equal bits. Random block bytes
// (every scale and code pattern, finite fp16 scales) are checked the same
// way. The sizes tessera assumes are checked against ggml's type traits.
func TestDequantizeMatchesGGML(t *testing.T) {
	lib := openPeer(t)
	rng := rand.New(rand.NewPCG(15, 1))
	for _, bt := range blockTypes {
		t.Run(bt.t.String(), func(t *testing.T) {
			name, bl, bb, ok := lib.TypeTraits(int(bt.g))
			if !ok || !strings.EqualFold(name, bt.g.String()) || bl != bt.t.BlockLen() || bb != bt.t.BlockBytes() || uint64(bb) != bt.g.TypeSize() {
				t.Fatalf("ggml %s: block %d × %d bytes (to_float %v); tessera %s: %d × %d", name, bl, bb, ok, bt.t, bt.t.BlockLen(), bt.t.BlockBytes())
			}
			rows, perRow := 6, 4*256
			x := testRows(rng, rows, perRow)
			q, err := lib.QuantizeRows(int(bt.g), x, rows, perRow)
			if err != nil {
				t.Fatal(err)
			}
			check := func(what string, q []byte) {
				want, err := lib.Dequantize(int(bt.g), q, len(q)/bb*bl)
				if err != nil {
					t.Fatal(err)
				}
				got := make([]float32, len(want))
				tensor.Dequantize(bt.t, got, q)
				if i, ok := sameBits(got, want); !ok {
					t.Fatalf("%s: element %d: tessera %v (%#08x), ggml %v (%#08x)", what, i, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
			check("quantized by ggml", q)
			raw := make([]byte, 64*bb)
			for i := range raw {
				raw[i] = byte(rng.Uint32())
			}
			for b := 0; b < 64; b++ {
				finiteHalves(bt.t, raw[b*bb:(b+1)*bb])
			}
			check("random blocks", raw)
		})
	}
}

// finiteHalves clears the top exponent bit of a block's fp16 scales so
// they are finite (ggml does not special-case Inf/NaN scales).
func finiteHalves(dt tensor.DType, blk []byte) {
	var at []int
	switch dt {
	case tensor.Q8_0, tensor.Q4_0, tensor.Q5_0:
		at = []int{0}
	case tensor.Q4K, tensor.Q5K, tensor.Q4_1, tensor.Q5_1:
		at = []int{0, 2}
	case tensor.Q6K:
		at = []int{208}
	}
	for _, i := range at {
		blk[i+1] &^= 0x40
	}
}

// TestQuantizersMatchGGML requires tessera's quantizers to write the
// bytes of ggml's reference quantizers.
func TestQuantizersMatchGGML(t *testing.T) {
	lib := openPeer(t)
	rng := rand.New(rand.NewPCG(15, 2))
	for _, g := range []gguf.GGMLType{gguf.TypeQ8_0, gguf.TypeQ4_0, gguf.TypeMXFP4, gguf.TypeQ4_K} {
		t.Run(g.String(), func(t *testing.T) {
			rows, perRow := 32, 4*256
			x := testRows(rng, rows, perRow)
			want, err := lib.QuantizeRows(int(g), x, rows, perRow)
			if err != nil {
				t.Fatal(err)
			}
			got, err := gguf.Encode(g, x)
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(want) {
				t.Fatalf("%d bytes, ggml %d", len(got), len(want))
			}
			for i := range got {
				if got[i] != want[i] {
					bb := int(g.TypeSize())
					t.Fatalf("byte %d (block %d, offset %d): tessera %#02x, ggml %#02x", i, i/bb, i%bb, got[i], want[i])
				}
			}
		})
	}
}
