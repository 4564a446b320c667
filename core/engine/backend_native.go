//go:build !js

package engine

// CPUBackend is the Backend of the CPU runner.
const CPUBackend = "cpu"
