//go:build js

package digest

import "hash"

// New returns a SHA-256 hash.
func New() hash.Hash { return newGeneric() }

// Sum256 is the SHA-256 of b.
func Sum256(b []byte) [Size]byte {
	d := newGeneric()
	d.Write(b)
	return d.sum()
}
