// Package digest is the SHA-256 the engine fingerprints models and checks
// saved conversations with. Native builds use crypto/sha256 (hardware
// accelerated); the browser bundles use the generic implementation here,
// because importing crypto/sha256 links Go's FIPS 140 module (AES, DRBG,
// SHA-3, HMAC and their self-tests: about 49 KB of each gzipped bundle)
// for one hash. Both give the same bytes (FIPS 180-4); the tests
// cross-check them at every length and write boundary.
package digest

import (
	"encoding/binary"
	"hash"
	"math/bits"
)

// Size is the length of a SHA-256 sum in bytes.
const Size = 32

const blockSize = 64

// k are the SHA-256 round constants: the first 32 bits of the fractional
// parts of the cube roots of the first 64 primes (FIPS 180-4 §4.2.2).
var k = [64]uint32{
	0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
	0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
	0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
	0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
	0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
	0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
	0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
	0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
}

// iv is the initial hash value: the first 32 bits of the fractional parts
// of the square roots of the first 8 primes (§5.3.3).
var iv = [8]uint32{0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a, 0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19}

// generic is SHA-256 in plain Go: h the chaining value, buf the partial
// block of n bytes, total the message length so far.
type generic struct {
	h     [8]uint32
	buf   [blockSize]byte
	n     int
	total uint64
}

func newGeneric() *generic {
	d := &generic{}
	d.Reset()
	return d
}

func (d *generic) Reset()         { d.h, d.n, d.total = iv, 0, 0 }
func (d *generic) Size() int      { return Size }
func (d *generic) BlockSize() int { return blockSize }

func (d *generic) Write(p []byte) (int, error) {
	n := len(p)
	d.total += uint64(n)
	if d.n > 0 {
		c := copy(d.buf[d.n:], p)
		d.n += c
		p = p[c:]
		if d.n < blockSize {
			return n, nil
		}
		d.blocks(d.buf[:])
		d.n = 0
	}
	if full := len(p) &^ (blockSize - 1); full > 0 {
		d.blocks(p[:full])
		p = p[full:]
	}
	d.n = copy(d.buf[:], p)
	return n, nil
}

// Sum appends the hash of what was written to b; d is unchanged.
func (d *generic) Sum(b []byte) []byte {
	s := d.sum()
	return append(b, s[:]...)
}

// sum pads a copy of d's state (a 1 bit, zeros, the 64-bit big-endian
// bit length; §5.1.1) and returns the final hash.
func (d *generic) sum() [Size]byte {
	c := *d
	var pad [blockSize + 8]byte
	pad[0] = 0x80
	zeros := (55 - int(c.total%blockSize) + blockSize) % blockSize // so the length ends a block
	binary.BigEndian.PutUint64(pad[1+zeros:], c.total*8)
	c.Write(pad[:1+zeros+8])
	var out [Size]byte
	for i, v := range c.h {
		binary.BigEndian.PutUint32(out[4*i:], v)
	}
	return out
}

// blocks runs the compression function over whole 64-byte blocks (§6.2.2):
// the message schedule w_t = σ1(w_{t-2}) + w_{t-7} + σ0(w_{t-15}) + w_{t-16}
// with σ0(x) = x⋙7 ⊕ x⋙18 ⊕ x≫3 and σ1(x) = x⋙17 ⊕ x⋙19 ⊕ x≫10, then
// 64 rounds of T1 = h + Σ1(e) + Ch(e,f,g) + k_t + w_t, T2 = Σ0(a) + Maj(a,b,c)
// with Σ0(a) = a⋙2 ⊕ a⋙13 ⊕ a⋙22 and Σ1(e) = e⋙6 ⊕ e⋙11 ⊕ e⋙25.
func (d *generic) blocks(p []byte) {
	var w [64]uint32
	for ; len(p) >= blockSize; p = p[blockSize:] {
		for i := range 16 {
			w[i] = binary.BigEndian.Uint32(p[4*i:])
		}
		for i := 16; i < 64; i++ {
			x, y := w[i-15], w[i-2]
			s0 := bits.RotateLeft32(x, -7) ^ bits.RotateLeft32(x, -18) ^ x>>3
			s1 := bits.RotateLeft32(y, -17) ^ bits.RotateLeft32(y, -19) ^ y>>10
			w[i] = s1 + w[i-7] + s0 + w[i-16]
		}
		a, b, c, dd, e, f, g, h := d.h[0], d.h[1], d.h[2], d.h[3], d.h[4], d.h[5], d.h[6], d.h[7]
		for i := range 64 {
			t1 := h + (bits.RotateLeft32(e, -6) ^ bits.RotateLeft32(e, -11) ^ bits.RotateLeft32(e, -25)) +
				(e&f ^ ^e&g) + k[i] + w[i]
			t2 := (bits.RotateLeft32(a, -2) ^ bits.RotateLeft32(a, -13) ^ bits.RotateLeft32(a, -22)) +
				(a&b ^ a&c ^ b&c)
			h, g, f, e, dd, c, b, a = g, f, e, dd+t1, c, b, a, t1+t2
		}
		d.h[0] += a
		d.h[1] += b
		d.h[2] += c
		d.h[3] += dd
		d.h[4] += e
		d.h[5] += f
		d.h[6] += g
		d.h[7] += h
	}
}

var _ hash.Hash = (*generic)(nil)
