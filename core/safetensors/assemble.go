package safetensors

import (
	"fmt"
	"io"
)

// Assemble builds a Checkpoint from tensor descriptions over named
// sources, for weights that come from another container (a GGUF file
// viewed tensor by tensor, plus small tensors converted in memory). Each
// tensor's Shard names its source in srcs and [Offset, Offset+Size) must lie
// inside it. A DType that is not a safetensors type (a ggml block type such
// as "Q4_K") is kept as given: its bytes are available through Bytes, and
// Float32 refuses it. Close closes every source that is an io.Closer.
func Assemble(srcs map[string]Source, tensors []*Tensor, metadata map[string]string) (*Checkpoint, error) {
	c := &Checkpoint{Metadata: metadata, tensors: map[string]*Tensor{}, srcs: srcs}
	if c.Metadata == nil {
		c.Metadata = map[string]string{}
	}
	fail := func(err error) (*Checkpoint, error) {
		for _, s := range srcs {
			if cl, ok := s.(io.Closer); ok {
				cl.Close()
			}
		}
		return nil, err
	}
	for _, t := range tensors {
		src, ok := srcs[t.Shard]
		if !ok {
			return fail(fmt.Errorf("safetensors: tensor %q: no source %q", t.Name, t.Shard))
		}
		if _, dup := c.tensors[t.Name]; dup {
			return fail(fmt.Errorf("safetensors: tensor %q appears twice", t.Name))
		}
		if t.Offset < 0 || t.Size < 0 || t.Offset > src.Size()-t.Size {
			return fail(fmt.Errorf("safetensors: tensor %q: data [%d, %d) outside the %d-byte source %s", t.Name, t.Offset, t.Offset+t.Size, src.Size(), t.Shard))
		}
		if t.DType.Valid() {
			n, err := t.DType.byteSize(t.NumElements())
			if err != nil || n != t.Size {
				return fail(fmt.Errorf("safetensors: tensor %q: %d bytes for shape %v of %s", t.Name, t.Size, t.Shape, t.DType))
			}
		}
		c.tensors[t.Name] = t
	}
	return c, nil
}
