package engine

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"

	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/wgsl"
)

// MemCheckContext is the context the memory check budgets the MLA cache
// for: generation at longer contexts grows the cache further.
const MemCheckContext = 4096

// MemEnv overrides the memory tessera assumes available (bytes, or with a
// K/M/G/T suffix): for machines where /proc/meminfo is wrong or absent, and
// for tests. "off" disables the check.
const MemEnv = "TESSERA_MEMORY_AVAILABLE"

// CheckMemory refuses a model that cannot fit in the memory available:
// the mapped weights (read in place, as stored), the KDA state and the MLA
// cache for MemCheckContext tokens, against MemAvailable (and the cgroup
// limit, in containers). With no way to tell what is available it passes.
func CheckMemory(m *model.Model, ck *safetensors.Checkpoint) error {
	avail, source, ok, err := AvailableMemory()
	if err != nil || !ok {
		return err
	}
	var weights int64
	for _, n := range ck.Names() {
		if t, ok := ck.Tensor(n); ok {
			weights += t.Size
		}
	}
	st := model.ComputeStats(m.Cfg)
	state := st.KDAStateBytes + st.CacheBytesPerTok*MemCheckContext
	if need := weights + state; need > avail {
		return fmt.Errorf("model needs about %s of memory (weights %s + state and cache for %d tokens %s) but only %s is available (%s); "+
			"use a smaller model or preset, half-precision or quantized weights, or free memory (%s=BYTES overrides)",
			HumanBytes(need), HumanBytes(weights), MemCheckContext, HumanBytes(state), HumanBytes(avail), source, MemEnv)
	}
	return nil
}

// AvailableMemory is the memory a new allocation can get: the override,
// else min(MemAvailable, cgroup v2 memory.max − memory.current) on Linux.
func AvailableMemory() (avail int64, source string, ok bool, err error) {
	if v := strings.TrimSpace(os.Getenv(MemEnv)); v != "" {
		if v == "off" {
			return 0, "", false, nil
		}
		n, err := ParseBytes(v)
		if err != nil {
			return 0, "", false, fmt.Errorf("%s: %v (want bytes, e.g. 8G, or off)", MemEnv, err)
		}
		return n, MemEnv, true, nil
	}
	if runtime.GOOS != "linux" {
		return 0, "", false, nil
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, "", false, nil
	}
	avail = -1
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 2 && f[0] == "MemAvailable:" {
			if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
				avail = kb << 10
			}
		}
	}
	if avail < 0 {
		return 0, "", false, nil
	}
	source = "MemAvailable in /proc/meminfo"
	if limit, err := os.ReadFile("/sys/fs/cgroup/memory.max"); err == nil {
		lim, err1 := strconv.ParseInt(strings.TrimSpace(string(limit)), 10, 64)
		cur, err2 := os.ReadFile("/sys/fs/cgroup/memory.current")
		used, err3 := strconv.ParseInt(strings.TrimSpace(string(cur)), 10, 64)
		if err1 == nil && err2 == nil && err3 == nil && lim-used < avail {
			avail, source = max(lim-used, 0), "cgroup memory.max − memory.current"
		}
	}
	return avail, source, true, nil
}

// ParseBytes reads "123", "512M", "8G", "1.5T" (powers of 1024; "512MiB"
// and "512MB" read as "512M").
func ParseBytes(s string) (int64, error) {
	mul := 1.0
	if t := strings.TrimSuffix(strings.TrimSuffix(s, "B"), "i"); len(t) < len(s) && t != "" && strings.ContainsAny(t[len(t)-1:], "kKmMgGtT") {
		s = t
	}
	if i := len(s) - 1; i >= 0 {
		switch s[i] {
		case 'k', 'K':
			mul, s = 1<<10, s[:i]
		case 'm', 'M':
			mul, s = 1<<20, s[:i]
		case 'g', 'G':
			mul, s = 1<<30, s[:i]
		case 't', 'T':
			mul, s = 1<<40, s[:i]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < 0 || v*mul > 1<<62 {
		return 0, fmt.Errorf("%q is not a byte count", s)
	}
	return int64(v * mul), nil
}

// HumanBytes formats n with a binary unit.
func HumanBytes(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// GPUMemEnv sets the GPU memory tessera may use (GPUMemory's forms):
// WebGPU does not report how much a device has, so without it a model too
// large for the GPU is found out when an upload fails. A model larger than
// the budget streams its routed experts (wgsl's expert streaming).
const GPUMemEnv = "TESSERA_GPU_MEMORY"

// GPUMemory is a GPU memory budget: Bytes, or Frac of the model's routed
// experts beside the rest of the model (a percentage: 50% keeps the dense
// part, state, caches and half of each MoE layer's experts on the GPU).
// The zero value is no budget.
type GPUMemory struct {
	Bytes int64
	Frac  float64
}

// ParseGPUMemory reads a budget: bytes with an optional K/M/G/T suffix
// ("512MiB", "6G"), or a percentage of the routed experts ("50%"). ""
// is no budget.
func ParseGPUMemory(s string) (GPUMemory, error) {
	s = strings.TrimSpace(s)
	switch {
	case s == "":
		return GPUMemory{}, nil
	case strings.HasSuffix(s, "%"):
		p, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(s, "%")), 64)
		if err != nil || p <= 0 || p > 100 {
			return GPUMemory{}, fmt.Errorf("GPU memory %q: want a percentage in (0, 100]", s)
		}
		return GPUMemory{Frac: p / 100}, nil
	}
	n, err := ParseBytes(s)
	if err != nil || n == 0 {
		return GPUMemory{}, fmt.Errorf("GPU memory %q: want bytes (e.g. 512MiB, 6G) or a percentage of the experts (e.g. 50%%)", s)
	}
	return GPUMemory{Bytes: n}, nil
}

// Options sets the budget in a GPU runner's options.
func (g GPUMemory) Options(o wgsl.RunnerOptions) wgsl.RunnerOptions {
	o.MemoryBudget, o.ExpertShare = g.Bytes, 0
	if g.Frac > 0 && g.Frac < 1 {
		o.MemoryBudget, o.ExpertShare = 0, g.Frac
	}
	return o
}

// String is the budget as ParseGPUMemory reads it ("" for none).
func (g GPUMemory) String() string {
	switch {
	case g.Frac > 0:
		return strconv.FormatFloat(100*g.Frac, 'g', -1, 64) + "%"
	case g.Bytes > 0:
		for _, u := range []struct {
			n int64
			s string
		}{{1 << 40, "T"}, {1 << 30, "G"}, {1 << 20, "M"}, {1 << 10, "K"}} {
			if g.Bytes%u.n == 0 {
				return strconv.FormatInt(g.Bytes/u.n, 10) + u.s
			}
		}
		return strconv.FormatInt(g.Bytes, 10)
	}
	return ""
}

// GPUBudget is the GPU memory budget GPUMemEnv sets (zero: none).
func GPUBudget() (GPUMemory, error) {
	g, err := ParseGPUMemory(os.Getenv(GPUMemEnv))
	if err != nil {
		return GPUMemory{}, fmt.Errorf("%s: %w", GPUMemEnv, err)
	}
	return g, nil
}
