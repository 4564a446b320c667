package tokenizer

import (
	"os"
	"path/filepath"
	"testing"
)

func TestByteCodec(t *testing.T) {
	c := ByteCodec{VocabSize: 512}
	ids, err := c.Encode("hé")
	if err != nil || len(ids) != 3 || ids[0] != 'h' {
		t.Fatalf("Encode: %v %v", ids, err)
	}
	s := c.Stream()
	var out []string
	for _, b := range []byte("é") {
		p, _ := s.Add(int(b))
		out = append(out, p)
	}
	if out[0] != "" || out[1] != "é" {
		t.Fatalf("pieces %q", out)
	}
	if p, _ := s.Add(300); p != "<|300|>" {
		t.Fatalf("id beyond bytes: %q", p)
	}
	p, _ := s.Add(0xC3)
	if p != "" || s.Flush() != "\xC3" {
		t.Fatal("incomplete tail not held back and flushed")
	}
	if _, err := (ByteCodec{VocabSize: 100}).Encode("x"); err == nil {
		t.Fatal("a vocabulary below 256 cannot hold byte ids")
	}
}

func TestLoadCodec(t *testing.T) {
	dir := t.TempDir()
	c, err := LoadCodec(dir, 512)
	if err != nil || c.Name() != "byte-level fallback (no tokenizer.json)" {
		t.Fatalf("no tokenizer: %v %v", c, err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokenizer.json"), []byte(`{"model":{"type":"BPE","vocab":{"a":0,"b":1,"ab":2},"merges":["a b"]}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err = LoadCodec(dir, 512)
	if err != nil || c.Vocab() != 3 {
		t.Fatalf("tokenizer.json: %v %v", c, err)
	}
	if _, err := LoadCodec(dir, 2); err == nil {
		t.Fatal("a tokenizer larger than the model's vocabulary must be refused")
	}
}
