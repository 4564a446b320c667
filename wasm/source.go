//go:build js && wasm

package main

import (
	"fmt"
	"io"
	"runtime"
	"sync"
	"syscall/js"
	"unsafe"
)

// jsSource is a model file the worker hands over, read by range into the
// wasm heap (safetensors.Source). It is whole (one part) or in the parts
// its manifest lists, which the worker fetches (an HTTP Range request,
// checked against the part's sha256, cached) on the first read that needs
// each: a text-only session never reads the part that holds the vision
// tower, so it is never downloaded. A part is its bytes in JavaScript
// memory (a Uint8Array: a download that was not cached) or the worker's
// cached copy ({size, readInto(dst, at), readHeap(addr, n, at), close()}:
// an OPFS file read synchronously, straight into the heap). release drops
// the bytes and closes the copies; a later read loads them again (from the
// cache).
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
	v      js.Value // the bytes or the cached copy; undefined until loaded and after release
}

// stored reports whether v is a cached copy ({size, readInto, readHeap, close})
// rather than bytes.
func stored(v js.Value) bool {
	return v.Type() == js.TypeObject && v.Get("readInto").Type() == js.TypeFunction && v.Get("size").Type() == js.TypeNumber
}

// newJSSource makes the source of file name from what the fetcher
// returned: the whole file, as a Uint8Array or a cached copy ({size,
// readInto, close}; fetch gets either again after release), or {size,
// parts: [{offset, size}], read(i) → Promise of part i, either way}.
func newJSSource(name string, v js.Value, fetch func() (js.Value, error)) (*jsSource, error) {
	whole := func(n int64) *jsSource {
		return &jsSource{name: name, n: n, parts: []jsPart{{0, n, v}},
			load: func(int) (js.Value, error) { return fetch() }}
	}
	if v.InstanceOf(js.Global().Get("Uint8Array")) {
		return whole(int64(v.Get("length").Int())), nil
	}
	bad := func(why string) (*jsSource, error) {
		return nil, fmt.Errorf("fetchFile(%q) returned %s, want a Uint8Array, a cached file ({size, readInto, close}), a file in parts ({size, parts, read}) or null: %s", name, v.Type(), why)
	}
	if stored(v) {
		if n := v.Get("size").Float(); n >= 0 && n == float64(int64(n)) {
			return whole(int64(n)), nil
		}
		return bad("its size is not a byte count")
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
			if size := partSize(v); size != pt.n {
				closeStored(v)
				return n, fmt.Errorf("reading %s: bytes %d-%d came back as %s of %d bytes, want %d bytes (a Uint8Array or a cached file)", s.name, pt.off, pt.off+pt.n-1, v.Type(), size, pt.n)
			}
			pt.v = v
		}
		dst := p[lo-off : hi-off]
		if !stored(pt.v) {
			n += js.CopyBytesToGo(dst, pt.v.Call("subarray", lo-pt.off, hi-pt.off))
			continue
		}
		k, err := readStored(pt.v, dst, lo-pt.off)
		n += k
		if err != nil {
			return n, fmt.Errorf("reading %s (bytes %d-%d) from the browser's cache: %w", s.name, lo, hi-1, err)
		}
	}
	if n < len(p) {
		return n, io.EOF
	}
	return n, nil
}

// partSize is the byte count of a part's value: a Uint8Array's length, a
// cached file's size, -1 for anything else.
func partSize(v js.Value) int64 {
	switch {
	case v.InstanceOf(js.Global().Get("Uint8Array")):
		return int64(v.Get("length").Int())
	case stored(v):
		return int64(v.Get("size").Float())
	}
	return -1
}

// readStored fills dst from the cached file v at offset at: straight into
// the wasm heap with its readHeap where the worker offers it, else with
// readInto through a JavaScript buffer.
func readStored(v js.Value, dst []byte, at int64) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	direct := v.Get("readHeap").Type() == js.TypeFunction
	var tmp js.Value
	got, err := catch(func() (any, error) {
		if direct {
			return v.Call("readHeap", uintptr(unsafe.Pointer(unsafe.SliceData(dst))), len(dst), at), nil
		}
		tmp = js.Global().Get("Uint8Array").New(len(dst))
		return v.Call("readInto", tmp, at), nil
	})
	runtime.KeepAlive(dst) // the address alone went to JavaScript
	if err != nil {
		return 0, err
	}
	if r := got.(js.Value); r.Type() != js.TypeNumber {
		return 0, fmt.Errorf("the cached file's read returned %s, want a byte count", r.Type())
	}
	k := got.(js.Value).Int()
	if !direct {
		js.CopyBytesToGo(dst[:k], tmp.Call("subarray", 0, k))
	}
	if k != len(dst) {
		return k, fmt.Errorf("read %d of %d bytes at offset %d (was the file changed or deleted?)", k, len(dst), at)
	}
	return k, nil
}

// closeStored closes v when it is a cached file (its OPFS handle).
func closeStored(v js.Value) {
	if stored(v) {
		catch(func() (any, error) { return v.Call("close"), nil }) // a failed close leaves nothing to do
	}
}

// release drops the file's bytes from JavaScript memory and closes its
// cached copies; a later read loads them again.
func (s *jsSource) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.parts {
		closeStored(s.parts[i].v)
		s.parts[i].v = js.Undefined()
	}
}

// Close releases the file (safetensors.Checkpoint.Close closes its
// sources: the engine's Close).
func (s *jsSource) Close() error {
	s.release()
	return nil
}
