package engine

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/gguf"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
)

// greedyIDs is a greedy generation's token ids.
func greedyIDs(t *testing.T, e *Engine, prompt string, n int) []int {
	t.Helper()
	var ids []int
	if _, err := e.Generate(context.Background(), Options{Prompt: prompt, MaxTokens: n, NoCache: true},
		func(p Piece) bool { ids = append(ids, p.ID); return true }); err != nil {
		t.Fatal(err)
	}
	return ids
}

// A GGUF file held in memory (the browser's fetched bytes) loads with the
// loader native Open uses (LoadGGUF): k3-micro exported to F16 gives the
// greedy tokens of its safetensors checkpoint, on the heap and deferred
// (the GPU runner's path) alike; a truncated or corrupt file is an error
// naming what is wrong. It runs under GOOS=js too (scripts/wasm/exec.sh).
func TestLoadGGUF(t *testing.T) {
	files := map[string][]byte{}
	for _, n := range []string{ConfigFile, TokenizerFile, safetensors.SingleFileName} {
		b, err := os.ReadFile(filepath.Join(microDir, n))
		if err != nil {
			t.Fatal(err)
		}
		files[n] = b
	}
	ref, err := Load(safetensors.MemOpener(files))
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	const prompt = "Hello, tessera!"
	want := greedyIDs(t, ref, prompt, 12)

	e, data := microGGUF(t, "f16")
	if got := greedyIDs(t, e, prompt, 12); !slices.Equal(got, want) {
		t.Errorf("GGUF greedy ids %v, safetensors %v", got, want)
	}
	if e.Cfg.NumHiddenLayers != ref.Cfg.NumHiddenLayers || e.Cfg.NumExperts != ref.Cfg.NumExperts {
		t.Errorf("GGUF config %d layers %d experts, safetensors %d and %d", e.Cfg.NumHiddenLayers, e.Cfg.NumExperts, ref.Cfg.NumHiddenLayers, ref.Cfg.NumExperts)
	}
	d, err := LoadGGUF(safetensors.BytesSource(data), true)
	if err != nil {
		t.Fatal(err)
	}
	d.Close()

	bad := slices.Clone(data)
	copy(bad, "GGUX")
	for _, tc := range []struct {
		name string
		b    []byte
		want string
	}{
		{"truncated", data[:len(data)/2], "gguf"},
		{"header only", data[:64], "gguf"},
		{"bad magic", bad, "gguf"},
		{"empty", nil, "gguf"},
	} {
		_, err := LoadGGUF(safetensors.BytesSource(tc.b), false)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: err %v, want an error mentioning %q", tc.name, err, tc.want)
		} else {
			t.Logf("%s: %v", tc.name, err)
		}
	}
}

// Exact (OpenOptions.Exact or TESSERA_EXACT=1) turns the CPU's int8
// activations off for the process, so a quantized file's greedy tokens are
// those of its dequantized float32 products (the GPU's arithmetic).
func TestOpenExact(t *testing.T) {
	if testing.Short() {
		t.Skip("exports k3-micro")
	}
	path := filepath.Join(t.TempDir(), "q8_0.gguf")
	if err := gguf.Export(microDir, path, gguf.ExportOptions{Type: "q8_0"}); err != nil {
		t.Fatal(err)
	}
	was := ref.SetInt8Activations(true)
	defer ref.SetInt8Activations(was)
	for _, c := range []struct {
		name  string
		exact bool
		env   string
		want  bool // int8 activations after Open
	}{{"default", false, "", true}, {"option", true, "", false}, {"env", false, "1", false}} {
		t.Run(c.name, func(t *testing.T) {
			ref.SetInt8Activations(true)
			t.Setenv(ExactEnv, c.env)
			e, err := Open(path, OpenOptions{Exact: c.exact})
			if err != nil {
				t.Fatal(err)
			}
			ids := greedyIDs(t, e, "The quick brown fox", 12)
			e.Close()
			on := ref.SetInt8Activations(true)
			if on != c.want {
				t.Fatalf("int8 activations after Open: %v, want %v", on, c.want)
			}
			ref.SetInt8Activations(false)
			f, err := Open(path, OpenOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if float := greedyIDs(t, f, "The quick brown fox", 12); !c.want && !slices.Equal(ids, float) {
				t.Errorf("exact greedy ids %v, float32 products' %v", ids, float)
			}
		})
	}
}

// Int8KernelsEnv picks the CPU's integer kernel set for the process, and
// an unknown name is refused with the sets this CPU has.
func TestOpenInt8KernelsEnv(t *testing.T) {
	prev, err := ref.SetInt8Kernels(ref.Int8Kernels()[0])
	require.NoError(t, err)
	defer ref.SetInt8Kernels(prev)
	t.Setenv(Int8KernelsEnv, "go")
	e, err := Open(microDir, OpenOptions{})
	require.NoError(t, err)
	e.Close()
	now, _ := ref.SetInt8Kernels(prev)
	require.Equal(t, "go", now)

	t.Setenv(Int8KernelsEnv, "nope")
	_, err = Open(microDir, OpenOptions{})
	require.ErrorContains(t, err, Int8KernelsEnv+"=nope")
	require.ErrorContains(t, err, "this CPU has")
}

// microGGUF exports k3-micro as a GGUF file of type typ and loads it from
// its bytes; the engine is closed when the test ends. It returns the
// file's bytes too.
func microGGUF(t testing.TB, typ string) (*Engine, []byte) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "k3-micro."+typ+".gguf")
	if err := gguf.Export(microDir, path, gguf.ExportOptions{Type: typ}); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	e, err := LoadGGUF(safetensors.BytesSource(data), false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close() })
	return e, data
}
