//go:build !cgo && !windows && !darwin

package main

import "errors"

// ui is empty without a window system.
type ui struct{}

// runWindow fails: on Linux and the BSDs ebiten's GLFW needs cgo.
func runWindow(*app) error {
	return errors.New("this tessera-desktop was built without cgo; ebiten needs cgo on Linux and the BSDs: rebuild with CGO_ENABLED=1 after scripts/setup.sh desktop")
}
