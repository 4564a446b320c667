//go:build js && wasm

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"syscall/js"
	"time"
)

// promise runs work in a new goroutine and returns a JS Promise that
// resolves with its result or rejects with a JS Error carrying its error
// message. A panic in work (a JS exception thrown by a syscall/js call)
// rejects the promise instead of ending the Go program. Exported functions
// must not block inside the js.FuncOf callback itself (the promise could
// never settle), hence the goroutine.
func promise(work func() (any, error)) js.Value {
	executor := js.FuncOf(func(_ js.Value, args []js.Value) any {
		resolve, reject := args[0], args[1]
		go func() {
			v, err := catch(work)
			if err != nil {
				reject.Invoke(jsError(err))
				return
			}
			resolve.Invoke(v)
		}()
		return nil
	})
	defer executor.Release() // the Promise constructor calls it synchronously
	return js.Global().Get("Promise").New(executor)
}

// catch calls f, turning a panic into an error.
func catch(f func() (any, error)) (v any, err error) {
	defer func() {
		if r := recover(); r != nil {
			if je, ok := r.(js.Error); ok {
				err = fmt.Errorf("JavaScript error: %s", je.Value.Get("message").String())
				return
			}
			err = fmt.Errorf("internal error: %v", r)
		}
	}()
	return f()
}

// jsError makes a JS Error with err's message.
func jsError(err error) js.Value {
	return js.Global().Get("Error").New(err.Error())
}

// await blocks the calling goroutine until the promise (or plain value) p
// settles and returns its value, or the rejection as an error. It must not
// run on the event-loop callback of a js.FuncOf.
func await(p js.Value) (js.Value, error) {
	type result struct {
		v   js.Value
		err error
	}
	ch := make(chan result, 1)
	onOK := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- result{v: arg(a, 0)}
		return nil
	})
	onErr := js.FuncOf(func(_ js.Value, a []js.Value) any {
		ch <- result{err: errorFromJS(arg(a, 0))}
		return nil
	})
	defer onOK.Release()
	defer onErr.Release()
	js.Global().Get("Promise").Call("resolve", p).Call("then", onOK, onErr)
	r := <-ch
	return r.v, r.err
}

// arg returns a[i] or undefined.
func arg(a []js.Value, i int) js.Value {
	if i < len(a) {
		return a[i]
	}
	return js.Undefined()
}

// errorFromJS turns a rejection reason into a Go error with its message.
func errorFromJS(v js.Value) error {
	if v.Type() == js.TypeObject && v.Get("message").Type() == js.TypeString {
		return errors.New(v.Get("message").String())
	}
	if v.Type() == js.TypeString {
		return errors.New(v.String())
	}
	return fmt.Errorf("JavaScript rejection: %s", js.Global().Get("String").Invoke(v).String())
}

// toJS converts a Go value to a plain JS object through JSON.
func toJS(v any) (js.Value, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return js.Undefined(), err
	}
	return js.Global().Get("JSON").Call("parse", string(b)), nil
}

// yielder lets a long computation give the JavaScript event loop a turn
// (so that a cancel message sent to the worker is seen) without the 4 ms
// clamping of setTimeout: it posts a message to itself on a MessageChannel
// and waits for it.
type yielder struct {
	port js.Value
	cb   js.Func
	ch   chan struct{}
	last time.Time
}

func newYielder() *yielder {
	y := &yielder{ch: make(chan struct{}, 1), last: time.Now()}
	mc := js.Global().Get("MessageChannel")
	if mc.IsUndefined() {
		return y
	}
	c := mc.New()
	y.cb = js.FuncOf(func(js.Value, []js.Value) any {
		select {
		case y.ch <- struct{}{}:
		default:
		}
		return nil
	})
	c.Get("port1").Set("onmessage", y.cb)
	y.port = c.Get("port2")
	return y
}

// maybe yields when at least every has passed since the last yield.
func (y *yielder) maybe(every time.Duration) {
	if time.Since(y.last) < every {
		return
	}
	if y.port.IsUndefined() {
		time.Sleep(0)
	} else {
		y.port.Call("postMessage", 0)
		<-y.ch
	}
	y.last = time.Now()
}

// close releases the callback.
func (y *yielder) close() {
	if !y.port.IsUndefined() {
		y.port.Call("close")
		y.cb.Release()
	}
}
