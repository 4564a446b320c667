//go:build js && wasm && !cpuonly && conformance

package main

import (
	"errors"
	"strings"
	"syscall/js"
	"time"

	"github.com/cogentcore/webgpu/wgpu"

	"github.com/tessera-llm/tessera/wgsl"
	"github.com/tessera-llm/tessera/wgsl/conformance"
)

// conformanceReport is what tesseraWasm.conformance resolves to.
type conformanceReport struct {
	Adapter  gpuInfo              `json:"adapter"`
	Cases    []conformance.Result `json:"cases"`
	Passed   int                  `json:"passed"`
	Failed   int                  `json:"failed"`
	Total    int                  `json:"total"` // cases in the full suite
	Millis   float64              `json:"ms"`
	GPUError []string             `json:"gpuErrors,omitempty"`
}

// runConformance runs the kernel conformance cases (the first perOp of
// every op × dtype; all with perOp ≤ 0) on a fresh WebGPU device, each
// inside error scopes, and reports per case.
func runConformance(perOp int) (any, error) {
	t0 := time.Now()
	jsDev, info, err := requestDevice()
	if err != nil {
		return nil, err
	}
	if js.Global().Get("wasm").IsUndefined() {
		return nil, errors.New("globalThis.wasm is not set: the loader must store the instantiated module there")
	}
	raw := wgpu.NewDevice(jsDev)
	d, err := wgsl.NewDevice(&raw, "webgpu", func() { jsDev.Call("destroy") })
	if err != nil {
		jsDev.Call("destroy")
		return nil, err
	}
	d.SetAdapter(info.adapterInfo())
	defer d.Close()
	all := conformance.Cases()
	cs := all
	if perOp > 0 {
		cs = conformance.Subset(all, perOp)
	}
	rep := conformanceReport{Adapter: info, Total: len(all)}
	kinds := []string{"internal", "out-of-memory", "validation"}
	for _, c := range cs {
		for _, k := range kinds {
			jsDev.Call("pushErrorScope", k)
		}
		res := conformance.Run(c, d, func() error {
			var msgs []string
			for i := len(kinds) - 1; i >= 0; i-- {
				e, perr := await(jsDev.Call("popErrorScope"))
				if perr != nil {
					msgs = append(msgs, "popErrorScope: "+perr.Error())
				} else if !e.IsNull() && !e.IsUndefined() {
					msgs = append(msgs, kinds[i]+" error: "+e.Get("message").String())
				}
			}
			if len(msgs) > 0 {
				return errors.New("WebGPU: " + strings.Join(msgs, "; "))
			}
			return nil
		})
		if res.OK {
			rep.Passed++
		} else {
			rep.Failed++
		}
		rep.Cases = append(rep.Cases, res)
	}
	rep.Millis = float64(time.Since(t0).Microseconds()) / 1000
	return toJS(rep)
}
