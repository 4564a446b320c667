package main

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzWriteNPY: writeNPY either refuses a shape that does not match the
// data (leaving no file behind) or writes a .npy 1.0 file whose header is
// 64-byte aligned, names the shape and is followed by exactly the data.
func FuzzWriteNPY(f *testing.F) {
	f.Add(2, 3, bytes.Repeat([]byte{0, 0, 128, 63}, 6))
	f.Add(0, 0, []byte{})
	f.Add(0, 5, []byte{})
	f.Add(1, 1, []byte{0xff, 0xff, 0xff, 0x7f}) // NaN
	f.Add(-1, -4, bytes.Repeat([]byte{1}, 16))
	f.Add(2, 3, bytes.Repeat([]byte{1}, 16))
	f.Add(math.MaxInt, 2, []byte{1, 2, 3, 4, 5, 6, 7, 8})
	f.Add(1<<32, 1<<32, []byte{})
	f.Fuzz(func(t *testing.T, rows, cols int, raw []byte) {
		data := make([]float32, len(raw)/4)
		for i := range data {
			data[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
		}
		dir := t.TempDir()
		path := filepath.Join(dir, "x.npy")
		err := writeNPY(path, data, rows, cols)
		entries, _ := os.ReadDir(dir)
		if err != nil {
			if rows >= 0 && cols >= 0 && int64(rows)*int64(cols) == int64(len(data)) && (cols == 0 || rows <= len(data)/cols) {
				t.Fatalf("writeNPY(%d×%d, %d values): %v", rows, cols, len(data), err)
			}
			if len(entries) != 0 {
				t.Fatalf("failed write left %s behind", entries[0].Name())
			}
			return
		}
		if len(entries) != 1 {
			t.Fatalf("directory holds %d entries after writing one file", len(entries))
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if len(b) < 10 || string(b[:8]) != "\x93NUMPY\x01\x00" {
			t.Fatalf("bad magic %q", b[:min(len(b), 8)])
		}
		hl := int(binary.LittleEndian.Uint16(b[8:10]))
		if (10+hl)%64 != 0 || 10+hl > len(b) || b[10+hl-1] != '\n' {
			t.Fatalf("header length %d not aligned or not newline-terminated", hl)
		}
		if !bytes.Contains(b[10:10+hl], []byte(fmt.Sprintf("'shape': (%d, %d)", rows, cols))) {
			t.Fatalf("header %q lacks the shape", b[10:10+hl])
		}
		if !bytes.Equal(b[10+hl:], raw[:4*len(data)]) {
			t.Fatal("data differs from the values written")
		}
	})
}
