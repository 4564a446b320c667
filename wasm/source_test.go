//go:build js && wasm

package main

import (
	"fmt"
	"io"
	"syscall/js"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fakeStored is a cached file as the worker hands it over ({size,
// readInto, readHeap, close}) over data; it counts closes, and short or
// throw make its reads misbehave. heap false leaves readHeap out.
func fakeStored(data []byte, closes *int, short, throw bool) js.Value {
	return fakeStoredHeap(data, closes, short, throw, true)
}

func fakeStoredHeap(data []byte, closes *int, short, throw, heap bool) js.Value {
	b := js.Global().Get("Uint8Array").New(len(data))
	js.CopyBytesToJS(b, data)
	o := js.Global().Get("Object").New()
	o.Set("size", len(data))
	if throw {
		o.Set("readInto", js.Global().Get("Function").New("dst", "at", "throw new Error('the file is gone')"))
		o.Set("readHeap", js.Global().Get("Function").New("p", "n", "at", "throw new Error('the file is gone')"))
		return o
	}
	o.Set("readInto", js.FuncOf(func(_ js.Value, a []js.Value) any {
		dst, at := a[0], a[1].Int()
		n := min(dst.Get("length").Int(), len(data)-at)
		if short {
			n /= 2
		}
		dst.Call("set", b.Call("subarray", at, at+n))
		return n
	}))
	if heap { // as the worker's: a view of the instance's memory (node-exec.js sets globalThis.wasm)
		o.Set("readHeap", js.FuncOf(func(_ js.Value, a []js.Value) any {
			mem := js.Global().Get("wasm").Get("instance").Get("exports").Get("mem").Get("buffer")
			return o.Call("readInto", js.Global().Get("Uint8Array").New(mem, a[0], a[1]), a[2])
		}))
	}
	o.Set("close", js.FuncOf(func(js.Value, []js.Value) any { *closes++; return nil }))
	return o
}

func testBytes(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>8)
	}
	return b
}

// A cached file is read by range into the wasm heap, directly (readHeap)
// or through a JavaScript buffer (readInto) where it has no readHeap, and
// closed on release; a file in parts may mix cached and downloaded parts.
func TestJSSourceStored(t *testing.T) {
	data := testBytes(10000)
	for _, direct := range []bool{true, false} {
		t.Run(fmt.Sprintf("direct=%v", direct), func(t *testing.T) {
			closes, fetches := 0, 0
			fetch := func() (js.Value, error) { fetches++; return fakeStoredHeap(data, &closes, false, false, direct), nil }
			v, _ := fetch()
			s, err := newJSSource("model.gguf", v, fetch)
			require.NoError(t, err)
			assert.EqualValues(t, len(data), s.Size())
			for _, r := range [][2]int{{0, 100}, {123, 4000}, {9990, 10}, {5000, 0}} {
				p := make([]byte, r[1])
				n, err := s.ReadAt(p, int64(r[0]))
				require.NoError(t, err)
				assert.Equal(t, r[1], n)
				assert.Equal(t, data[r[0]:r[0]+r[1]], p)
			}
			p := make([]byte, 20)
			n, err := s.ReadAt(p, 9990)
			assert.ErrorIs(t, err, io.EOF)
			assert.Equal(t, 10, n)
			s.release()
			assert.Equal(t, 1, closes)
			_, err = s.ReadAt(p[:5], 10) // fetched again
			require.NoError(t, err)
			assert.Equal(t, data[10:15], p[:5])
			assert.Equal(t, 2, fetches)
			require.NoError(t, s.Close())
			assert.Equal(t, 2, closes)

			// parts: a downloaded one (bytes) and a cached one
			parts := js.Global().Get("JSON").Call("parse", `{"size": 10000, "parts": [{"offset": 0, "size": 6000}, {"offset": 6000, "size": 4000}]}`)
			parts.Set("read", js.FuncOf(func(_ js.Value, a []js.Value) any {
				if a[0].Int() == 0 {
					b := js.Global().Get("Uint8Array").New(6000)
					js.CopyBytesToJS(b, data[:6000])
					return js.Global().Get("Promise").Call("resolve", b)
				}
				return js.Global().Get("Promise").Call("resolve", fakeStoredHeap(data[6000:], &closes, false, false, direct))
			}))
			s, err = newJSSource("model.safetensors", parts, nil)
			require.NoError(t, err)
			q := make([]byte, 3000)
			_, err = s.ReadAt(q, 4500) // across the two parts
			require.NoError(t, err)
			assert.Equal(t, data[4500:7500], q)
			s.release()
			assert.Equal(t, 3, closes)
		})
	}
}

// A cached file that reads short, throws, or has another size than its
// part is an error naming the file and the bytes.
func TestJSSourceStoredErrors(t *testing.T) {
	data := testBytes(1000)
	closes := 0
	for name, tc := range map[string]struct {
		v    js.Value
		want string
	}{
		"short": {fakeStored(data, &closes, true, false), "reading model.gguf (bytes 100-199) from the browser's cache: read 50 of 100 bytes at offset 100 (was the file changed or deleted?)"},
		"throw": {fakeStored(data, &closes, false, true), "reading model.gguf (bytes 100-199) from the browser's cache: JavaScript error: the file is gone"},
		"no count": {func() js.Value {
			o := fakeStored(data, &closes, false, false)
			o.Set("readHeap", js.Global().Get("Function").New("p", "n", "at", "return 'all of it'"))
			return o
		}(), "reading model.gguf (bytes 100-199) from the browser's cache: the cached file's read returned string, want a byte count"},
	} {
		t.Run(name, func(t *testing.T) {
			s, err := newJSSource("model.gguf", tc.v, nil)
			require.NoError(t, err)
			_, err = s.ReadAt(make([]byte, 100), 100)
			assert.EqualError(t, err, tc.want)
		})
	}
	parts := js.Global().Get("JSON").Call("parse", `{"size": 2000, "parts": [{"offset": 0, "size": 2000}]}`)
	parts.Set("read", js.FuncOf(func(js.Value, []js.Value) any {
		return js.Global().Get("Promise").Call("resolve", fakeStored(data, &closes, false, false))
	}))
	s, err := newJSSource("model.safetensors", parts, nil)
	require.NoError(t, err)
	before := closes
	_, err = s.ReadAt(make([]byte, 10), 0)
	assert.ErrorContains(t, err, "reading model.safetensors: bytes 0-1999 came back as object of 1000 bytes, want 2000 bytes")
	assert.Equal(t, before+1, closes, "the wrong-sized copy is closed")
	bad := js.Global().Get("JSON").Call("parse", `{"size": -1}`)
	bad.Set("readInto", js.FuncOf(func(js.Value, []js.Value) any { return 0 }))
	_, err = newJSSource("x.gguf", bad, nil)
	assert.ErrorContains(t, err, `fetchFile("x.gguf") returned object`)
	assert.ErrorContains(t, err, "its size is not a byte count")
}
