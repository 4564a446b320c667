package engine

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/wgsl"
)

func TestParseGPUMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want GPUMemory
		err  bool
	}{
		{"", GPUMemory{}, false},
		{"512MiB", GPUMemory{Bytes: 512 << 20}, false},
		{"512MB", GPUMemory{Bytes: 512 << 20}, false},
		{"6G", GPUMemory{Bytes: 6 << 30}, false},
		{"1.5GiB", GPUMemory{Bytes: 3 << 29}, false},
		{"1048576", GPUMemory{Bytes: 1 << 20}, false},
		{"50%", GPUMemory{Frac: 0.5}, false},
		{" 25 % ", GPUMemory{Frac: 0.25}, false},
		{"100%", GPUMemory{Frac: 1}, false},
		{"0%", GPUMemory{}, true},
		{"150%", GPUMemory{}, true},
		{"0", GPUMemory{}, true},
		{"lots", GPUMemory{}, true},
		{"MiB", GPUMemory{}, true},
	} {
		got, err := ParseGPUMemory(tc.in)
		if tc.err {
			require.Error(t, err, tc.in)
			continue
		}
		require.NoError(t, err, tc.in)
		require.Equal(t, tc.want, got, tc.in)
		back, err := ParseGPUMemory(got.String()) // String reads back
		require.NoError(t, err, tc.in)
		require.Equal(t, got, back, tc.in)
	}
	require.Equal(t, "512M", GPUMemory{Bytes: 512 << 20}.String())
	require.Equal(t, "50%", GPUMemory{Frac: 0.5}.String())
	// a share below 1 budgets the experts; 100 % and bytes are budgets
	o := GPUMemory{Frac: 0.5}.Options(wgsl.RunnerOptions{MaxChunk: 8})
	require.Equal(t, 0.5, o.ExpertShare)
	require.Zero(t, o.MemoryBudget)
	o = GPUMemory{Frac: 1}.Options(wgsl.RunnerOptions{MaxChunk: 8})
	require.Zero(t, o.ExpertShare)
	o = GPUMemory{Bytes: 7}.Options(wgsl.RunnerOptions{MaxChunk: 8})
	require.Equal(t, int64(7), o.MemoryBudget)
}
