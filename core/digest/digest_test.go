package digest

import (
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// FIPS 180-4 example messages and their published sums.
func TestGenericVectors(t *testing.T) {
	for _, tc := range []struct{ msg, sum string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
		{"abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"},
		{strings.Repeat("a", 1_000_000), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"},
	} {
		d := newGeneric()
		d.Write([]byte(tc.msg))
		require.Equal(t, tc.sum, hex.EncodeToString(d.Sum(nil)), "%d bytes", len(tc.msg))
	}
}

// The generic hash against crypto/sha256 at every length around the block
// and padding boundaries, the message written in two pieces split at every
// cut-off, and Sum leaving the state as it was.
func TestGenericMatchesCrypto(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	msg := make([]byte, 300)
	for i := range msg {
		msg[i] = byte(r.Uint32())
	}
	for n := range len(msg) + 1 {
		want := sha256.Sum256(msg[:n])
		for cut := 0; cut <= n; cut++ {
			d := newGeneric()
			d.Write(msg[:cut])
			mid := d.Sum(nil) // must not disturb d
			d.Write(msg[cut:n])
			if got := d.Sum(nil); string(got) != string(want[:]) {
				t.Fatalf("len %d cut %d: %x, want %x", n, cut, got, want)
			}
			if w := sha256.Sum256(msg[:cut]); string(mid) != string(w[:]) {
				t.Fatalf("len %d: sum after %d bytes %x, want %x", n, cut, mid, w)
			}
		}
		d := newGeneric()
		d.Write(msg[:n])
		d.Reset()
		d.Write(msg[:n])
		require.Equal(t, want, d.sum(), "after Reset, len %d", n)
	}
}

// The exported functions give crypto/sha256's bytes on every platform.
func TestExported(t *testing.T) {
	b := []byte("tessera session")
	require.Equal(t, sha256.Sum256(b), Sum256(b))
	h := New()
	h.Write(b)
	want := sha256.Sum256(b)
	require.Equal(t, want[:], h.Sum(nil))
	require.Equal(t, Size, h.Size())
}

func BenchmarkGeneric(b *testing.B) {
	buf := make([]byte, 1<<20)
	b.SetBytes(int64(len(buf)))
	d := newGeneric()
	for b.Loop() {
		d.Reset()
		d.Write(buf)
		d.sum()
	}
}
