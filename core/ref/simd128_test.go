//go:build !js

package ref

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestSIMD128ModuleIsAssembledFromSource: the committed kernel module the
// browser build embeds is what wat2wasm makes of simd128/kernels.wat, and
// that is what scripts/gen/simd128.py writes (regenerate both with
// `go generate ./core/ref`).
func TestSIMD128ModuleIsAssembledFromSource(t *testing.T) {
	gen, err := exec.Command("python3", "../../scripts/gen/simd128.py").Output()
	require.NoError(t, err, "scripts/gen/simd128.py")
	src, err := os.ReadFile("simd128/kernels.wat")
	require.NoError(t, err)
	require.True(t, bytes.Equal(gen, src), "simd128/kernels.wat is not what scripts/gen/simd128.py writes: run go generate ./core/ref")
	tool, err := exec.LookPath("wat2wasm")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but wat2wasm is missing: install it with scripts/setup.sh wasm")
		}
		t.Skip("wat2wasm not installed (scripts/setup.sh wasm)")
	}
	out := filepath.Join(t.TempDir(), "kernels.wasm")
	msg, err := exec.Command(tool, "simd128/kernels.wat", "-o", out).CombinedOutput()
	require.NoError(t, err, "wat2wasm: %s", msg)
	want, err := os.ReadFile(out)
	require.NoError(t, err)
	got, err := os.ReadFile("simd128/kernels.wasm")
	require.NoError(t, err)
	require.True(t, bytes.Equal(want, got), "simd128/kernels.wasm is stale: run go generate ./core/ref")
}
