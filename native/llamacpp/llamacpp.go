// Package llamacpp drives llama.cpp's C API (libllama and ggml, loaded at
// run time with dlopen) so tessera can be checked against, and timed
// against, an implementation nobody here wrote. It is built for the
// prebuilt shared libraries of @node-llama-cpp/linux-x64@3.22.1 (llama.cpp
// commit 0ad4a86, scripts/peers/fetch.sh installs them) and is native
// linux/amd64 with cgo only; elsewhere Open returns an error.
//
// The C API passes llama_model_params, llama_context_params,
// llama_model_quantize_params and llama_batch by value, so the C shim in
// this file declares those structs with the layout of that commit's
// llama.h (read from the llama.cpp source node-llama-cpp 3.22.1 ships in
// llama/gitRelease.bundle, and from a disassembly of the *_default_params
// functions of the shipped library). Compile-time assertions pin every
// offset the shim relies on, and Open checks at run time that the library
// reports the commit the layout was written for and that each
// *_default_params function returns the documented defaults in the
// documented places; a drifted library is refused instead of being fed
// misplaced fields.
//
// Use: Open the library directory once per process, LoadModel a GGUF file,
// NewContext with explicit settings, Decode token ids and read Logits.
// Everything runs on the CPU unless ModelParams.GPULayers offloads layers,
// which needs the Vulkan build of the same release
// (@node-llama-cpp/linux-x64-vulkan@3.22.1, VulkanDirName; Open tells the
// two builds apart by their file names).
package llamacpp

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Version is the npm package whose libraries this package is written for.
const Version = "@node-llama-cpp/linux-x64@3.22.1"

// Commit is the llama.cpp commit those libraries report (llama_commit());
// the struct layouts in the shim are that commit's.
const Commit = "0ad4a86"

// LibDirName is the directory scripts/peers/fetch.sh unpacks the libraries
// into, under its cache directory.
const LibDirName = "node-llama-cpp-linux-x64-3.22.1"

// VulkanDirName is where scripts/peers/fetch.sh vulkan unpacks the Vulkan
// build of the same release (libllama.vulkan…, libggml-vulkan.so).
const VulkanDirName = "node-llama-cpp-linux-x64-vulkan-3.22.1"

// FetchCommand is the command that installs the libraries.
const FetchCommand = "scripts/peers/fetch.sh (or make fetch-peers)"

// FType is a llama.cpp file type (enum llama_ftype) for Quantize.
type FType int32

// File types used here (values of enum llama_ftype at Commit).
const (
	FTypeF32  FType = 0
	FTypeF16  FType = 1
	FTypeQ4_0 FType = 2
	FTypeQ8_0 FType = 7
	FTypeBF16 FType = 32
	// K-quant mixes and MXFP4 (llama.cpp picks each tensor's type).
	FTypeQ4_K_M    FType = 15
	FTypeQ5_K_M    FType = 17
	FTypeQ6_K      FType = 18
	FTypeMXFP4_MOE FType = 38
)

// FTypes names the file types by llama-quantize's spelling.
var FTypes = map[string]FType{
	"f32": FTypeF32, "f16": FTypeF16, "bf16": FTypeBF16, "q8_0": FTypeQ8_0, "q4_0": FTypeQ4_0,
	"q4_k_m": FTypeQ4_K_M, "q5_k_m": FTypeQ5_K_M, "q6_k": FTypeQ6_K, "mxfp4_moe": FTypeMXFP4_MOE,
}

// ModelParams are the model-loading settings.
type ModelParams struct {
	// GPULayers is n_gpu_layers: how many layers ggml offloads to its GPU
	// backend (0: everything on the CPU; a number above the layer count
	// offloads every layer and the output). Only the Vulkan build has a
	// GPU backend; with the CPU build LoadModel refuses a non-zero value.
	GPULayers int
	// NoMmap reads the file into memory instead of memory-mapping it
	// (llama.cpp's default load mode is automatic; this package maps).
	NoMmap bool
	// NoExtraBuffers turns off llama.cpp's extra weight buffer types
	// (use_extra_bufts: weights repacked for the CPU's kernels, e.g. AMX
	// or interleaved Q4_0/Q8_0 rows), which are on by default.
	NoExtraBuffers bool
}

// ContextParams are the settings of a context. Zero values take the
// defaults noted on each field; the defaults are the exact-comparison
// settings (flash attention off, F32 cache).
type ContextParams struct {
	// NCtx is the context length in tokens (default 512).
	NCtx int
	// NBatch is the most tokens one Decode call may pass; NUBatch the
	// physical batch llama.cpp splits it into (both default NCtx).
	NBatch, NUBatch int
	// Threads is the thread count for single-token decode, ThreadsBatch
	// for larger batches (defaults: 1 and Threads).
	Threads, ThreadsBatch int
	// FlashAttention turns flash attention on (llama.cpp's default is
	// automatic, which means on for the CPU); off here unless set.
	FlashAttention bool
	// F16Cache stores K/V (and the MLA latent cache) in F16, llama.cpp's
	// default; F32 here unless set.
	F16Cache bool
}

func (p ContextParams) withDefaults() ContextParams {
	if p.NCtx <= 0 {
		p.NCtx = 512
	}
	if p.NBatch <= 0 {
		p.NBatch = p.NCtx
	}
	if p.NUBatch <= 0 {
		p.NUBatch = p.NBatch
	}
	if p.Threads <= 0 {
		p.Threads = 1
	}
	if p.ThreadsBatch <= 0 {
		p.ThreadsBatch = p.Threads
	}
	return p
}

// ErrNotInstalled is wrapped by Open's error when the libraries are not in
// the directory.
var ErrNotInstalled = errors.New("llama.cpp libraries not installed")

// DefaultVulkanDir is where the Vulkan build is looked for:
// $TESSERA_LLAMACPP_VULKAN_DIR when set, else VulkanDirName beside
// DefaultDir's.
func DefaultVulkanDir() string {
	if d := os.Getenv("TESSERA_LLAMACPP_VULKAN_DIR"); d != "" {
		return d
	}
	if c := os.Getenv("TESSERA_PEER_CACHE"); c != "" {
		return filepath.Join(c, VulkanDirName)
	}
	return filepath.Join(repoRoot(), "testdata", "peers", "cache", VulkanDirName)
}

// DefaultDir returns where the libraries are looked for:
// $TESSERA_LLAMACPP_DIR when set, else
// testdata/peers/cache/node-llama-cpp-linux-x64-3.22.1 under the tessera
// checkout that contains the working directory ($TESSERA_PEER_CACHE
// replaces testdata/peers/cache, as it does for fetch.sh).
func DefaultDir() string {
	if d := os.Getenv("TESSERA_LLAMACPP_DIR"); d != "" {
		return d
	}
	if c := os.Getenv("TESSERA_PEER_CACHE"); c != "" {
		return filepath.Join(c, LibDirName)
	}
	root := repoRoot()
	return filepath.Join(root, "testdata", "peers", "cache", LibDirName)
}

// repoRoot walks up from the working directory to the directory holding
// tessera's go.mod; it returns "." when there is none.
func repoRoot() string {
	d, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		b, err := os.ReadFile(filepath.Join(d, "go.mod"))
		if err == nil && len(b) > 0 && containsModule(b) {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return "."
		}
		d = parent
	}
}

func containsModule(gomod []byte) bool {
	const want = "module github.com/tessera-llm/tessera\n"
	return len(gomod) >= len(want) && string(gomod[:len(want)]) == want
}

// missing is Open's error for a directory without the libraries.
func missing(dir string) error {
	return fmt.Errorf("%w: no %s (or its Vulkan build %s) in %s; fetch them with %s (scripts/peers/fetch.sh vulkan for the Vulkan build), or point TESSERA_LLAMACPP_DIR at a directory holding them",
		ErrNotInstalled, cpuBuild.llama, vulkanBuild.llama, dir, FetchCommand)
}

// build names the three libraries Open loads from one of the packages.
type build struct {
	llama, ggml, common string
	vulkan              bool
}

// The two builds' file names (libllama-common.so is the same name in both).
var (
	cpuBuild    = build{llama: "libllama.v0.5.0.so", ggml: "libggml.v0.5.0.so", common: "libllama-common.so"}
	vulkanBuild = build{llama: "libllama.vulkan.v0.5.0.so", ggml: "libggml.vulkan.v0.5.0.so", common: "libllama-common.so", vulkan: true}
)

// findBuild returns the build whose three libraries are all in dir.
func findBuild(dir string) (build, error) {
	for _, b := range []build{cpuBuild, vulkanBuild} {
		ok := true
		for _, f := range []string{b.llama, b.ggml, b.common} {
			if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
				ok = false
			}
		}
		if ok {
			return b, nil
		}
	}
	return build{}, missing(dir)
}
