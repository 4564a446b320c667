//go:build !(cgo && linux && amd64)

package llamacpp

import (
	"errors"
	"runtime"
)

// errUnsupported is every call's answer off native linux/amd64 with cgo:
// the libraries this package drives exist only there.
var errUnsupported = errors.New("llamacpp: needs linux/amd64 with cgo (llama.cpp's prebuilt libraries are linux-x64); this is " + runtime.GOOS + "/" + runtime.GOARCH)

// Lib is the loaded llama.cpp library (unavailable in this build).
type Lib struct {
	Dir, Commit, SystemInfo string
	Vulkan                  bool
	Devices                 []string
}

// Model is a GGUF model loaded by llama.cpp (unavailable in this build).
type Model struct{}

// Context is a llama.cpp context (unavailable in this build).
type Context struct{}

// Open reports that llama.cpp cannot be driven from this build.
func Open(dir string) (*Lib, error) { return nil, errUnsupported }

// LoadModel is unavailable in this build.
func (l *Lib) LoadModel(path string, p ModelParams) (*Model, error) { return nil, errUnsupported }

// Quantize is unavailable in this build.
func (l *Lib) Quantize(in, out string, ft FType, threads int) error { return errUnsupported }

// NVocab is unavailable in this build.
func (m *Model) NVocab() int { return 0 }

// NParams is unavailable in this build.
func (m *Model) NParams() uint64 { return 0 }

// Desc is unavailable in this build.
func (m *Model) Desc() string { return "" }

// Close is unavailable in this build.
func (m *Model) Close() {}

// NewContext is unavailable in this build.
func (m *Model) NewContext(p ContextParams) (*Context, error) { return nil, errUnsupported }

// Params is unavailable in this build.
func (c *Context) Params() ContextParams { return ContextParams{} }

// Pos is unavailable in this build.
func (c *Context) Pos() int { return 0 }

// Decode is unavailable in this build.
func (c *Context) Decode(tokens []int, allLogits bool) error { return errUnsupported }

// Logits is unavailable in this build.
func (c *Context) Logits(i int, dst []float32) ([]float32, error) { return nil, errUnsupported }

// Reset is unavailable in this build.
func (c *Context) Reset() {}

// Close is unavailable in this build.
func (c *Context) Close() {}

// TypeTraits is unavailable in this build.
func (l *Lib) TypeTraits(t int) (name string, blockLen, blockBytes int, ok bool) {
	return "", 0, 0, false
}

// Dequantize is unavailable in this build.
func (l *Lib) Dequantize(t int, src []byte, n int) ([]float32, error) { return nil, errUnsupported }

// QuantizeRows is unavailable in this build.
func (l *Lib) QuantizeRows(t int, src []float32, rows, perRow int) ([]byte, error) {
	return nil, errUnsupported
}
