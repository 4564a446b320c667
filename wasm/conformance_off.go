//go:build js && wasm && (cpuonly || !conformance)

package main

import "errors"

// runConformance needs the kernel test cases, compiled in only with
// -tags conformance (the test bundle), to keep the shipped bundle
// small.
func runConformance(int) (any, error) {
	return nil, errors.New("this tessera.wasm was built without the kernel conformance cases (build with WASM_TAGS=conformance)")
}
