package wgsl

import (
	"fmt"
	"strings"
)

// AdapterInfo is what the platform code knows about a WebGPU adapter before
// a model is put on it: natively from wgpu's AdapterInfo (package native),
// in the browser from the JS adapter's info and isFallbackAdapter (wasm/).
// Empty fields are unknown.
type AdapterInfo struct {
	Name         string // adapter name (natively often only an id)
	Vendor       string
	Architecture string
	Driver       string // driver description, e.g. "llvmpipe (LLVM 15.0.6, 256 bits)"
	Description  string
	// Type is the adapter type in lower case: "discrete-gpu",
	// "integrated-gpu", "virtual-gpu", "cpu" or "unknown".
	Type string
	// Fallback is set for the browser's fallback adapter
	// (isFallbackAdapter: a software implementation such as SwiftShader).
	Fallback bool
}

// String names the adapter in one line for notices.
func (a AdapterInfo) String() string {
	var parts []string
	for _, s := range []string{a.Vendor, a.Architecture, a.Name, a.Driver, a.Description} {
		s = strings.TrimSpace(s)
		if s != "" && !isHexID(s) && !contains(parts, s) {
			parts = append(parts, s)
		}
	}
	if len(parts) == 0 {
		parts = append(parts, "unnamed adapter")
	}
	s := strings.Join(parts, " ")
	if a.Type != "" {
		s += ", type " + a.Type
	}
	if a.Fallback {
		s += ", fallback adapter"
	}
	return s
}

// isHexID reports a bare numeric id such as "0x10005": wgpu-native fills
// names and vendors with those, which say nothing to a user.
func isHexID(s string) bool {
	if !strings.HasPrefix(s, "0x") || len(s) == 2 {
		return false
	}
	for _, c := range s[2:] {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

func contains(xs []string, s string) bool {
	for _, x := range xs {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// softwareNames are substrings (lower case) of the names of software
// WebGPU/Vulkan/D3D implementations that run the GPU's work on the CPU:
// Mesa's llvmpipe (its Vulkan driver is lavapipe) and softpipe, Google's
// SwiftShader (Chromium's fallback adapter) and Microsoft's WARP ("Basic
// Render Driver").
var softwareNames = []string{"llvmpipe", "lavapipe", "softpipe", "swiftshader", "warp", "basic render driver"}

// Software says whether a is a software adapter — one that runs shaders on
// the CPU — and why: adapter type CPU, the browser's fallback adapter, or a
// known software driver named in its vendor, architecture, name, driver or
// description. "" when it is not.
func (a AdapterInfo) Software() string {
	if strings.EqualFold(a.Type, "cpu") {
		return "adapter type CPU"
	}
	if a.Fallback {
		return "the browser's fallback adapter"
	}
	for _, f := range []string{a.Name, a.Vendor, a.Architecture, a.Driver, a.Description} {
		l := strings.ToLower(f)
		for _, n := range softwareNames {
			if hasWord(l, n) {
				return "software driver " + n
			}
		}
	}
	return ""
}

// hasWord reports whether w occurs in s at word boundaries (so "warp" does
// not match "warpspeed" or a vendor string that merely contains the
// letters).
func hasWord(s, w string) bool {
	for i := 0; ; {
		j := strings.Index(s[i:], w)
		if j < 0 {
			return false
		}
		j += i
		before := j == 0 || !isAlnum(s[j-1])
		after := j+len(w) == len(s) || !isAlnum(s[j+len(w)])
		if before && after {
			return true
		}
		i = j + 1
	}
}

func isAlnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// AutoChoice is the decision of backend "auto" for one adapter.
type AutoChoice struct {
	// GPU is true when the model should run on the adapter, false for the
	// CPU path.
	GPU bool
	// Reason says in one phrase what was chosen and why, for the CLI's
	// stderr line, the desktop app's notice and the browser's info().
	Reason string
}

// ChooseAuto is the one place where backend "auto" decides between the
// WebGPU runner and the CPU path, used by the CLI, the desktop app and the
// browser engine. A software adapter (Software: llvmpipe/lavapipe,
// SwiftShader, WARP, adapter type CPU, the browser's fallback adapter)
// runs the same arithmetic on the same CPU cores through a shader
// interpreter/JIT and is always slower than the CPU path (measured on
// k3-micro: llvmpipe decodes 38 tok/s against 1,344 on the CPU backend;
// SwiftShader in Chromium 2.5 tok/s against 88 on the wasm CPU path), so
// auto takes the CPU there unless allowSoftware is set (the tests use it to
// exercise the GPU runner under auto's fallbacks). Every other adapter is
// taken. Backend "gpu" never asks: it forces the adapter (callers say so
// next to Reason).
func ChooseAuto(a AdapterInfo, allowSoftware bool) AutoChoice {
	why := a.Software()
	switch {
	case why == "":
		return AutoChoice{GPU: true, Reason: fmt.Sprintf("GPU adapter %s", a)}
	case allowSoftware:
		return AutoChoice{GPU: true, Reason: fmt.Sprintf("software adapter %s (%s), allowed explicitly", a, why)}
	default:
		return AutoChoice{GPU: false, Reason: fmt.Sprintf("the only GPU adapter is a software one (%s: %s), slower than the CPU path", a, why)}
	}
}

// AutoSoftwareEnv names the environment variable that, set to 1, lets
// backend "auto" of the native CLI and desktop app take a software adapter
// (ChooseAuto's allowSoftware): for tests of auto's GPU paths on lavapipe.
const AutoSoftwareEnv = "TESSERA_AUTO_SOFTWARE_GPU"
