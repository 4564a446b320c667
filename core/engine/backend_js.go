//go:build js

package engine

// CPUBackend is the Backend of the CPU runner (compiled to WebAssembly).
const CPUBackend = "cpu (wasm)"
