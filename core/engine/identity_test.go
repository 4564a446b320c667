package engine

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/digest"
)

// A GGUF model's identity covers its tensor index, as a safetensors
// model's does: two files of one configuration in other types are other
// models for saved conversations, and the engine counts their weight
// bytes (a GGUF checkpoint has no safetensors files to count from).
func TestIdentityGGUF(t *testing.T) {
	engines := map[string]*Engine{}
	for _, typ := range []string{"f16", "q8_0"} {
		e, data := microGGUF(t, typ)
		engines[typ] = e
		var sum int64
		for _, n := range e.ck.Names() {
			tn, _ := e.ck.Tensor(n)
			sum += tn.Size
		}
		assert.Positive(t, e.Info().WeightBytes, typ)
		assert.Equal(t, sum, e.Info().WeightBytes, typ)
		assert.Less(t, e.Info().WeightBytes, int64(len(data))*3/2, "%s: weights within the file's size and its converted tensors", typ)
	}
	assert.NotEqual(t, engines["f16"].Identity(), engines["q8_0"].Identity(), "F16 and Q8_0 files of one model")
}

// A safetensors model's identity is what it was before identity read the
// tensor index from Checkpoint.Names (the union of its files' tensors), so
// conversations saved by earlier builds still restore.
func TestIdentitySafetensorsUnchanged(t *testing.T) {
	e := openMicro(t, 0)
	raw, err := os.ReadFile(filepath.Join(microDir, ConfigFile))
	require.NoError(t, err)
	h := digest.New()
	h.Write(raw)
	var names []string
	for _, f := range e.ck.Files() {
		for n := range f.Tensors {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	for _, n := range names {
		tn, _ := e.ck.Tensor(n)
		fmt.Fprintf(h, "%s|%s|%v|%d|%d\n", n, tn.DType, tn.Shape, tn.Size, tn.Offset)
	}
	var want [32]byte
	copy(want[:], h.Sum(nil))
	assert.Equal(t, want, e.Identity())
	assert.Positive(t, e.Info().WeightBytes)
}
