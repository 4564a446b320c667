// Package display checks for an X display before ebiten initialises; see
// display.go. On other systems, and without cgo, it does nothing.
package display
