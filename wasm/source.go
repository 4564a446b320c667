//go:build js && wasm

package main

import (
	"fmt"
	"io"
	"sync"
	"syscall/js"
)

// jsSource is a model file held in JavaScript memory and read by range
// into the wasm heap (safetensors.Source). It is whole (one part, a
// Uint8Array) or in the parts its manifest lists, which the worker fetches
// (an HTTP Range request, checked against the part's sha256, cached) on
// the first read that needs each: a text-only session never reads the part
// that holds the vision tower, so it is never downloaded. release drops the
// bytes; a later read loads them again (from the worker's cache).
type jsSource struct {
	name  string
	n     int64
	mu    sync.Mutex // one load at a time
	parts []jsPart
	load  func(i int) (js.Value, error) // part i's bytes, a Uint8Array
}

// jsPart is one byte range of a jsSource.
type jsPart struct {
	off, n int64
	v      js.Value // the bytes; undefined until loaded and after release
}

// newJSSource makes the source of file name from what the fetcher
// returned: a Uint8Array (the whole file; fetch gets it again after
// release), or {size, parts: [{offset, size}], read(i) → Promise of part
// i's Uint8Array}.
func newJSSource(name string, v js.Value, fetch func() (js.Value, error)) (*jsSource, error) {
	if v.InstanceOf(js.Global().Get("Uint8Array")) {
		n := int64(v.Get("length").Int())
		return &jsSource{name: name, n: n, parts: []jsPart{{0, n, v}},
			load: func(int) (js.Value, error) { return fetch() }}, nil
	}
	bad := func(why string) (*jsSource, error) {
		return nil, fmt.Errorf("fetchFile(%q) returned %s, want a Uint8Array, a file in parts ({size, parts, read}) or null: %s", name, v.Type(), why)
	}
	if v.Type() != js.TypeObject || v.Get("read").Type() != js.TypeFunction || v.Get("size").Type() != js.TypeNumber {
		return bad("no size or read")
	}
	s := &jsSource{name: name, n: int64(v.Get("size").Float())}
	ps := v.Get("parts")
	if ps.Type() != js.TypeObject || ps.Length() == 0 {
		return bad("no parts")
	}
	at := int64(0)
	for i := range ps.Length() {
		p := ps.Index(i)
		off, n := int64(p.Get("offset").Float()), int64(p.Get("size").Float())
		if off != at || n <= 0 {
			return bad(fmt.Sprintf("part %d is bytes %d+%d, want bytes from %d", i, off, n, at))
		}
		s.parts = append(s.parts, jsPart{off: off, n: n})
		at += n
	}
	if at != s.n {
		return bad(fmt.Sprintf("parts cover %d of %d bytes", at, s.n))
	}
	read := v.Get("read")
	s.load = func(i int) (js.Value, error) { return await(read.Invoke(i)) }
	return s, nil
}

func (s *jsSource) Size() int64 { return s.n }

func (s *jsSource) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 || off > s.n {
		return 0, fmt.Errorf("read at offset %d of the %d-byte %s", off, s.n, s.name)
	}
	end := min(s.n, off+int64(len(p)))
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for i := range s.parts {
		pt := &s.parts[i]
		lo, hi := max(off, pt.off), min(end, pt.off+pt.n)
		if lo >= hi {
			continue
		}
		if pt.v.IsUndefined() {
			v, err := s.load(i)
			if err != nil {
				return n, fmt.Errorf("reading %s (bytes %d-%d): %w", s.name, pt.off, pt.off+pt.n-1, err)
			}
			if !v.InstanceOf(js.Global().Get("Uint8Array")) || int64(v.Get("length").Int()) != pt.n {
				return n, fmt.Errorf("reading %s: bytes %d-%d came back as %s, want a %d-byte Uint8Array", s.name, pt.off, pt.off+pt.n-1, v.Type(), pt.n)
			}
			pt.v = v
		}
		n += js.CopyBytesToGo(p[lo-off:hi-off], pt.v.Call("subarray", lo-pt.off, hi-pt.off))
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// release drops the file's bytes from JavaScript memory; a later read
// loads them again.
func (s *jsSource) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.parts {
		s.parts[i].v = js.Undefined()
	}
}
