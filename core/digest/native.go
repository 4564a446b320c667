//go:build !js

package digest

import (
	"crypto/sha256"
	"hash"
)

// New returns a SHA-256 hash.
func New() hash.Hash { return sha256.New() }

// Sum256 is the SHA-256 of b.
func Sum256(b []byte) [Size]byte { return sha256.Sum256(b) }
