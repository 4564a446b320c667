//go:build js && wasm

package main

import (
	"errors"
	"syscall/js"

	"github.com/tessera-llm/tessera/wgsl"
)

// gpuInfo describes the browser's WebGPU adapter for engine.info() and the
// page. The fields come from the raw JS adapter: the binding's
// Adapter.GetInfo is a stub in the browser.
type gpuInfo struct {
	Available    bool               `json:"available"`
	Reason       string             `json:"reason,omitempty"` // why not available
	Vendor       string             `json:"vendor,omitempty"`
	Architecture string             `json:"architecture,omitempty"`
	Device       string             `json:"device,omitempty"`
	Description  string             `json:"description,omitempty"`
	Fallback     bool               `json:"fallback"` // a software adapter (SwiftShader)
	Features     []string           `json:"features,omitempty"`
	Limits       map[string]float64 `json:"limits,omitempty"`
	Errors       []string           `json:"errors,omitempty"` // uncaptured WebGPU errors of the device
}

// adapterInfo is g as wgsl.ChooseAuto reads it.
func (g gpuInfo) adapterInfo() wgsl.AdapterInfo {
	return wgsl.AdapterInfo{Vendor: g.Vendor, Architecture: g.Architecture, Name: g.Device,
		Description: g.Description, Fallback: g.Fallback}
}

// Errors of device acquisition, worded for the page.
var (
	errNoWebGPU  = errors.New("this browser has no WebGPU (navigator.gpu is missing); tessera runs on the CPU instead")
	errNoAdapter = errors.New("WebGPU is present but the browser offers no adapter (GPU blocklisted or WebGPU disabled; headless Chromium needs --enable-unsafe-webgpu); tessera runs on the CPU instead")
)

// errGPULost wraps the errors of GPU steps that found the device lost.
var errGPULost = errors.New("the GPU device was lost")

// gpuErrors holds the first uncaptured WebGPU errors of the GPU runner's
// device.
var gpuErrors []string

// limitNames are the limits the GPU runner asks for (as high as the
// adapter allows) and reports.
var limitNames = []string{
	"maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize",
	"maxStorageBuffersPerShaderStage", "maxComputeInvocationsPerWorkgroup",
	"maxComputeWorkgroupSizeX", "maxComputeWorkgroupsPerDimension", "minStorageBufferOffsetAlignment",
}

// optionalFeatures are requested only when the adapter has them: no kernel
// may require them (webgpu.md §7).
var optionalFeatures = []string{"shader-f16", "subgroups", "timestamp-query"}

// requestAdapter returns the high-performance adapter. It blocks the
// goroutine (never call it inside a js.FuncOf callback).
func requestAdapter() (js.Value, error) {
	gpu := js.Global().Get("navigator").Get("gpu")
	if gpu.IsUndefined() || gpu.IsNull() {
		return js.Null(), errNoWebGPU
	}
	ad, err := await(gpu.Call("requestAdapter", map[string]any{"powerPreference": "high-performance"}))
	if err != nil {
		return js.Null(), errors.New("WebGPU requestAdapter failed: " + err.Error())
	}
	if ad.IsNull() || ad.IsUndefined() {
		return js.Null(), errNoAdapter
	}
	return ad, nil
}

// probeGPU describes the adapter without creating a device.
func probeGPU() gpuInfo {
	ad, err := requestAdapter()
	if err != nil {
		return gpuInfo{Reason: err.Error()}
	}
	g := gpuInfo{Available: true, Limits: map[string]float64{}}
	if info := ad.Get("info"); info.Type() == js.TypeObject {
		str := func(k string) string {
			if v := info.Get(k); v.Type() == js.TypeString {
				return v.String()
			}
			return ""
		}
		g.Vendor, g.Architecture, g.Device, g.Description = str("vendor"), str("architecture"), str("device"), str("description")
		if v := info.Get("isFallbackAdapter"); v.Type() == js.TypeBoolean {
			g.Fallback = v.Bool()
		}
	}
	if v := ad.Get("isFallbackAdapter"); v.Type() == js.TypeBoolean && v.Bool() {
		g.Fallback = true
	}
	feats := ad.Get("features")
	for _, f := range optionalFeatures {
		if feats.Call("has", f).Bool() {
			g.Features = append(g.Features, f)
		}
	}
	lim := ad.Get("limits")
	for _, n := range limitNames {
		if v := lim.Get(n); v.Type() == js.TypeNumber {
			g.Limits[n] = v.Float()
		}
	}
	return g
}

// requestDevice acquires a WebGPU device for the GPU runner as webgpu.md §4
// describes: the adapter's own limits for the sizes kernels care about and
// the optional features the adapter has. The GPU runner wraps the result
// with wgpu.NewDevice and keeps the raw value for error scopes. Unused until
// the WGSL runner runs whole models in the browser.
func requestDevice() (device js.Value, info gpuInfo, err error) {
	ad, err := requestAdapter()
	if err != nil {
		return js.Null(), gpuInfo{Reason: err.Error()}, err
	}
	info = probeGPU()
	lim := ad.Get("limits")
	req := map[string]any{}
	for _, n := range []string{"maxStorageBufferBindingSize", "maxBufferSize", "maxComputeWorkgroupStorageSize", "maxStorageBuffersPerShaderStage"} {
		req[n] = lim.Get(n)
	}
	feats := make([]any, 0, len(info.Features))
	for _, f := range info.Features {
		feats = append(feats, f)
	}
	dev, err := await(ad.Call("requestDevice", map[string]any{"requiredLimits": req, "requiredFeatures": feats}))
	if err != nil {
		return js.Null(), info, errors.New("WebGPU requestDevice failed: " + err.Error())
	}
	if dev.IsNull() || dev.IsUndefined() {
		return js.Null(), info, errors.New("WebGPU requestDevice returned no device")
	}
	return dev, info, nil
}
