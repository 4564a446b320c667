package safetensors

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// A header of MaxTensors+1 empty tensors is refused by count, naming the
// limit, before the entries past the limit are kept.
func TestParseTensorCountCap(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a ~60 MB header")
	}
	var b bytes.Buffer
	b.WriteByte('{')
	for i := range MaxTensors + 1 {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"t%d":{"dtype":"F32","shape":[0],"data_offsets":[0,0]}`, i)
	}
	b.WriteByte('}')
	_, err := Parse(BytesSource(rawFile(b.String(), nil)), "many.safetensors")
	if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("more than %d tensors", MaxTensors)) {
		t.Fatalf("Parse of %d tensors: %v", MaxTensors+1, err)
	}
}

// Shapes whose element count overflows int64, and byte sizes that do, are
// refused with a message naming the shape.
func TestParseShapeOverflow(t *testing.T) {
	for _, hdr := range []string{
		`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,0]}}`,
		`{"a":{"dtype":"F32","shape":[9223372036854775807,2],"data_offsets":[0,0]}}`,
		`{"a":{"dtype":"F64","shape":[2305843009213693952],"data_offsets":[0,0]}}`,
		`{"a":{"dtype":"F32","shape":[99999999999999999999],"data_offsets":[0,0]}}`,
	} {
		_, err := Parse(BytesSource(rawFile(hdr, nil)), "x.safetensors")
		if err == nil || !strings.Contains(err.Error(), `tensor "a"`) {
			t.Errorf("%s: %v", hdr, err)
		}
	}
}
