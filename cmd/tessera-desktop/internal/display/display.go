//go:build cgo && (linux || freebsd || netbsd || openbsd || dragonfly)

// Package display stops tessera-desktop with a clear message when there is
// no X display. ebiten's GLFW initialises in a package init and panics
// without one, before main runs. This package imports only syscall, so
// Go's initialisation order (packages sorted by import path, each as soon
// as its imports are initialised) runs its init before os, and therefore
// before ebiten.
package display

import "syscall"

func init() {
	if v, ok := syscall.Getenv("DISPLAY"); ok && v != "" {
		return
	}
	msg := "tessera-desktop: no X display: DISPLAY is not set. Run it in a desktop session, over ssh -X, or headless with xvfb-run -a tessera-desktop --model DIR --script FILE\n"
	syscall.Write(2, []byte(msg))
	syscall.Exit(1)
}
