package wgsl

import (
	"strings"
	"testing"
)

// ChooseAuto over adapter infos as the platforms report them: software
// adapters (by type, fallback flag or driver name) go to the CPU path unless
// allowed; real GPUs are taken.
func TestChooseAuto(t *testing.T) {
	cases := []struct {
		name     string
		a        AdapterInfo
		gpu      bool   // without allowSoftware
		software string // substring of Software(); "" = not software
	}{
		{"lavapipe as wgpu-native reports it", AdapterInfo{Name: "0x0", Driver: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: "cpu"}, false, "adapter type CPU"},
		{"llvmpipe with an unknown type", AdapterInfo{Name: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: "unknown"}, false, "llvmpipe"},
		{"lavapipe named in the driver", AdapterInfo{Driver: "Mesa lavapipe 22.3.6", Type: "unknown"}, false, "lavapipe"},
		{"SwiftShader in Chromium", AdapterInfo{Vendor: "google", Architecture: "swiftshader", Fallback: true}, false, "fallback"},
		{"SwiftShader without the fallback flag", AdapterInfo{Vendor: "google", Architecture: "swiftshader"}, false, "swiftshader"},
		{"SwiftShader Vulkan natively", AdapterInfo{Name: "SwiftShader Device (Subzero)", Type: "cpu"}, false, "CPU"},
		{"WARP", AdapterInfo{Name: "Microsoft Basic Render Driver", Type: "unknown"}, false, "basic render driver"},
		{"WARP by name", AdapterInfo{Description: "D3D12 WARP", Type: "unknown"}, false, "warp"},
		{"softpipe", AdapterInfo{Driver: "softpipe", Type: "unknown"}, false, "softpipe"},
		{"fallback flag alone", AdapterInfo{Vendor: "acme", Fallback: true}, false, "fallback"},
		{"NVIDIA discrete", AdapterInfo{Name: "NVIDIA H200", Driver: "NVIDIA 550.54", Type: "discrete-gpu"}, true, ""},
		{"Intel integrated", AdapterInfo{Name: "Intel(R) UHD Graphics 620 (KBL GT2)", Driver: "Intel open-source Mesa driver", Type: "integrated-gpu"}, true, ""},
		{"Apple in the browser", AdapterInfo{Vendor: "apple", Architecture: "metal-3"}, true, ""},
		{"virtual GPU", AdapterInfo{Name: "Virtio-GPU Venus", Type: "virtual-gpu"}, true, ""},
		{"warp only as part of a word", AdapterInfo{Name: "Warpdrive X1", Type: "discrete-gpu"}, true, ""},
		{"nothing known", AdapterInfo{}, true, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sw := c.a.Software()
			if (sw == "") != (c.software == "") || !strings.Contains(strings.ToLower(sw), strings.ToLower(c.software)) {
				t.Fatalf("Software() = %q, want %q", sw, c.software)
			}
			got := ChooseAuto(c.a, false)
			if got.GPU != c.gpu {
				t.Fatalf("ChooseAuto(%+v) = %+v, want GPU %v", c.a, got, c.gpu)
			}
			if got.Reason == "" || strings.Contains(got.Reason, "\n") {
				t.Fatalf("reason %q: want one non-empty line", got.Reason)
			}
			if !c.gpu && (!strings.Contains(got.Reason, sw) || !strings.Contains(got.Reason, "CPU path")) {
				t.Errorf("reason %q does not say why (%s) and what was chosen", got.Reason, sw)
			}
			// allowSoftware takes every adapter
			if a := ChooseAuto(c.a, true); !a.GPU {
				t.Errorf("ChooseAuto(allowSoftware) = %+v, want the GPU", a)
			} else if !c.gpu && !strings.Contains(a.Reason, "allowed") {
				t.Errorf("allowed software adapter: reason %q does not say so", a.Reason)
			}
		})
	}
}

func TestAdapterInfoString(t *testing.T) {
	a := AdapterInfo{Name: "0x0", Vendor: "0x10005", Driver: "llvmpipe (LLVM 15.0.6, 256 bits)", Type: "cpu"}
	if s := a.String(); s != "llvmpipe (LLVM 15.0.6, 256 bits), type cpu" {
		t.Errorf("String() = %q", s)
	}
	b := AdapterInfo{Vendor: "google", Architecture: "swiftshader", Fallback: true}
	if s := b.String(); s != "google swiftshader, fallback adapter" {
		t.Errorf("String() = %q", s)
	}
	if s := (AdapterInfo{}).String(); s != "unnamed adapter" {
		t.Errorf("String() = %q", s)
	}
}
