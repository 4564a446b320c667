//go:build js && wasm

// Command wasm is tessera compiled to WebAssembly (GOOS=js GOARCH=wasm):
// the same Go model code as the native binary, loaded by web/tessera-worker.js
// inside a Web Worker. It sets globalThis.tesseraWasm to an object whose
// functions return Promises and do their work in goroutines:
//
//	load(baseURL, {fetchFile, backend,       fetch config.json,
//	     allowSoftwareAdapter,               tokenizer.json (if any) and the
//	     gpuMemory, exact}) → info           safetensors files — or, when
//	                                         baseURL ends in .gguf, that one
//	                                         GGUF file (engine.LoadGGUF);
//	                                         backend "cpu" (default), "gpu"
//	                                         or "auto"; gpuMemory ("512MiB",
//	                                         "50%"): a GPU budget below the
//	                                         model streams its routed experts
//	                                         (info().expertCache and each
//	                                         generation's stats.expertCache
//	                                         report the cache); exact: true
//	                                         has the CPU path multiply
//	                                         quantized weights in float32
//	                                         as the GPU does (SetExact)
//	generate(request, onToken)      → stats  onToken(id, text) per token;
//	                                         request.images: [{rgba, width,
//	                                         height}] decoded images placed
//	                                         before the prompt
//	                                         request.messages: [{role,
//	                                         content, images}] a chat
//	                                         rendered with the chat template
//	                                         instead of prompt (images: how
//	                                         many of request.images go
//	                                         before that message's text);
//	                                         request.stop: strings that end
//	                                         the output; request.jsonSchema
//	                                         (a JSON Schema object) or
//	                                         request.json: true constrain it
//	                                         to JSON; request.live: true
//	                                         passes onToken a third argument
//	                                         now and then, the live
//	                                         routing/state view
//	                                         (engine.LiveSnapshot as JSON),
//	                                         and stats.live at the end
//	saveSession({messages | chat, images}) → Uint8Array  the conversation with
//	                                         (chat: chat.completions messages as JSON)
//	                                         the state its last reply left
//	                                         (for OPFS / Cache Storage)
//	restoreSession(Uint8Array)      → {messages}  puts a saved state back:
//	                                         the next generate of these
//	                                         messages plus a new one
//	                                         prefills only the new one;
//	                                         refuses another model/version
//	chat(requestJSON, images,       → result an OpenAI chat completion: the
//	     onEvent)                            messages rendered by the model's
//	                                         chat template (chat.go)
//	cancel()                                 stop the running generation
//	info()                          → info   model facts, backend, adapter;
//	                                         on the GPU, gpuMemory (bytes
//	                                         the runner's buffers hold and
//	                                         their parts: engine.GPUMemoryUse)
//	dispose()                                free the model
//	conformance(perOp)              → report kernel conformance cases on
//	                                         WebGPU (-tags webgpu bundles)
//
// fetchFile(name) must return a Promise of a Uint8Array with the file, or
// of null when the model has no such file (for a GGUF URL, name is the
// file's base name); the worker's implementation
// streams with progress, keeps files in Cache Storage and checks their
// sha256. Without it load fetches baseURL+name directly.
//
// Images arrive decoded (the worker draws them to an OffscreenCanvas and
// reads the pixels back): rgba is a Uint8Array or Uint8ClampedArray of
// width·height·4 non-premultiplied bytes. They are encoded by the vision
// tower of the backend (the GPU tower on WebGPU) and fused into the prompt
// as `tessera run --image` does.
//
// With backend "gpu" the model runs on package wgsl's Runner over a WebGPU
// device from requestDevice (gpu.go, gpu_runner.go; left out of bundles
// built with -tags cpuonly), with "cpu" on the CPU (the engine's default);
// "auto" (the page's default) picks the GPU when wgsl.ChooseAuto takes the
// browser's adapter — a real GPU, not a software or fallback one such as
// SwiftShader, which is slower than the CPU path (allowSoftwareAdapter: true
// takes it anyway) — and the CPU otherwise, when there is no adapter or the
// GPU runner fails, saying what it chose and why in info().backend. Every GPU step runs inside WebGPU error scopes, so a rejected
// command is an error, never wrong tokens.
//
// Once the exports are set, globalThis.__tesseraReady (if it is a
// function) is called.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"path"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/core/chat"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/generate"
	"github.com/tessera-llm/tessera/core/grammar"
	"github.com/tessera-llm/tessera/core/imageio"
	"github.com/tessera-llm/tessera/core/model"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/safetensors"
	"github.com/tessera-llm/tessera/wgsl"
)

// host holds the one engine of this wasm instance (a worker loads one
// model).
type host struct {
	mu     sync.Mutex
	eng    *engine.Engine
	cancel context.CancelFunc
	gpu    *gpuInfo
}

// heapLimit is the most memory a model on the CPU may take: the 4 GiB a
// wasm32 heap can grow to (Chromium grants it; Go's runtime uses it), less
// 512 MiB for the runtime, the runner's scratch and the files in flight.
const heapLimit = 4<<30 - 512<<20

func main() {
	model.HeapLimit = heapLimit
	h := &host{}
	exports := map[string]any{
		"load":           js.FuncOf(h.load),
		"generate":       js.FuncOf(h.generate),
		"chat":           js.FuncOf(h.chatCompletion),
		"cancel":         js.FuncOf(h.cancelGen),
		"info":           js.FuncOf(h.info),
		"saveSession":    js.FuncOf(h.saveSession),
		"restoreSession": js.FuncOf(h.restoreSession),
		"dispose":        js.FuncOf(h.dispose),
		"check":          js.FuncOf(check),
		// loseGPUForTest(wait) → Promise<whether a GPU device was
		// destroyed> (tests of the device-lost fallback; wait: resolve
		// once the loss has been observed).
		"loseGPUForTest": js.FuncOf(func(_ js.Value, a []js.Value) any { return loseGPUForTest(arg(a, 0).Truthy()) }),
		// conformance(perOp) → Promise<report>: the WGSL kernel
		// conformance cases on this browser's WebGPU (-tags webgpu).
		"conformance": js.FuncOf(func(_ js.Value, a []js.Value) any {
			perOp := 0
			if v := arg(a, 0); v.Type() == js.TypeNumber {
				perOp = v.Int()
			}
			return promise(func() (any, error) { return runConformance(perOp) })
		}),
	}
	js.Global().Set("tesseraWasm", js.ValueOf(exports))
	if ready := js.Global().Get("__tesseraReady"); ready.Type() == js.TypeFunction {
		ready.Invoke()
	}
	select {} // keep the exports alive
}

// load(baseURL, {fetchFile}) → Promise<info>.
func (h *host) load(_ js.Value, args []js.Value) any {
	base := arg(args, 0)
	opts := arg(args, 1)
	return promise(func() (any, error) {
		if base.Type() != js.TypeString {
			return nil, errors.New("load: the model URL must be a string")
		}
		url, ggufName := modelPath(base.String())
		// The fetched files stay in JavaScript memory (jsSource): the engine
		// reads tensors from them by range. On the GPU the matrices go from
		// there to GPU buffers one at a time (engine.LoadDeferred), so the
		// wasm heap (at most 4 GiB) never holds the model; on the CPU they
		// are copied into the heap and the files released. A file the
		// manifest splits into parts is fetched part by part as it is read.
		var files []*jsSource
		open := opener(url, opts, &files)
		loadErr := func(err error) error { return fmt.Errorf("loading the model from %s: %w", url+ggufName, err) }
		// loadModel reads the model through open: the GGUF file, or the
		// directory's files (deferred: weights left for the GPU upload)
		loadModel := func(deferred bool) (*engine.Engine, error) {
			if ggufName == "" {
				if deferred {
					return engine.LoadDeferred(open)
				}
				return engine.Load(open)
			}
			src, err := open(ggufName)
			if err != nil {
				return nil, err
			}
			return engine.LoadGGUF(src, deferred)
		}
		cpuEngine := func() (*engine.Engine, error) {
			e, err := loadModel(false)
			for _, f := range files {
				f.release() // the tensors were copied into the heap
			}
			files = nil
			if err != nil {
				return nil, loadErr(err)
			}
			return e, nil
		}
		backend := "cpu"
		if opts.Type() == js.TypeObject && opts.Get("backend").Type() == js.TypeString {
			backend = opts.Get("backend").String()
		}
		if opts.Type() == js.TypeObject && opts.Get("exact").Type() == js.TypeBoolean && opts.Get("exact").Bool() {
			engine.SetExact()
		}
		var budget engine.GPUMemory
		if v := opts.Get("gpuMemory"); opts.Type() == js.TypeObject && v.Type() == js.TypeString {
			var err error
			if budget, err = engine.ParseGPUMemory(v.String()); err != nil {
				return nil, fmt.Errorf("load: gpuMemory: %w", err)
			}
		}
		var e *engine.Engine
		var err error
		switch backend {
		case "cpu":
			if e, err = cpuEngine(); err != nil {
				return nil, err
			}
		case "gpu", "auto":
			g := probeGPU()
			// auto decides in either bundle: the CPU-only one, which
			// tessera.js loads for auto where no adapter but the fallback
			// one is offered, gives the same reason for the same choice
			var choice wgsl.AutoChoice
			if backend == "auto" {
				allow := opts.Get("allowSoftwareAdapter")
				choice = autoChoice(g, allow.Type() == js.TypeBoolean && allow.Bool())
				if !choice.GPU {
					h.gpu = &g
					if e, err = cpuEngine(); err != nil {
						return nil, err
					}
					e.Backend = engine.CPUBackend + "; " + choice.Reason
					break
				}
			}
			var info gpuInfo
			var gerr error
			if haveGPURunner {
				if e, err = loadModel(true); err != nil {
					return nil, loadErr(err)
				}
				info, gerr = useGPU(e, backend == "auto", budget)
			} else {
				info, gerr = useGPU(nil, false, budget)
			}
			h.gpu = &info
			if gerr == nil {
				if backend == "auto" {
					e.Backend += "; auto chose the GPU: " + choice.Reason
				}
				break
			}
			if e != nil {
				e.Close()
			}
			if backend == "gpu" {
				return nil, fmt.Errorf("backend gpu: %w", gerr)
			}
			if e, err = cpuEngine(); err != nil {
				return nil, err
			}
			e.Backend = engine.CPUBackend + "; WebGPU failed: " + gerr.Error()
		default:
			return nil, fmt.Errorf("load: backend %q: want cpu, gpu or auto", backend)
		}
		// the states of earlier prompts (a chat's previous turns, a shared
		// system prompt), so a turn prefills only its new tokens
		e.Cache = engine.NewPrefixCache(prefixCacheBytes)
		h.mu.Lock()
		old := h.eng
		h.eng = e
		h.mu.Unlock()
		if old != nil {
			old.Close()
		}
		return h.infoValue()
	})
}

// autoChoice is what backend 'auto' takes with adapter g (wgsl.ChooseAuto),
// its reason worded for engine.Backend: the GPU, or the CPU when g is no
// adapter or one auto passes over.
func autoChoice(g gpuInfo, allowSoftware bool) wgsl.AutoChoice {
	if !g.Available {
		return wgsl.AutoChoice{Reason: "no WebGPU adapter: " + g.Reason}
	}
	c := wgsl.ChooseAuto(g.adapterInfo(), allowSoftware)
	if !c.GPU {
		c.Reason = "auto chose the CPU: " + c.Reason + " (backend 'gpu' forces it)"
	}
	return c
}

// cpuKernels says what runs the CPU path's matrix products: core/ref's
// WebAssembly SIMD128 module, or pure Go and why.
func cpuKernels() string {
	ok, why := ref.SIMD128()
	if ok {
		return why
	}
	return "pure Go (" + why + ")"
}

// modelPath splits a model URL into its directory's URL (ending in "/")
// and, for a URL ending in .gguf — one GGUF file (engine.LoadGGUF) rather
// than a model directory — the file's name.
func modelPath(u string) (dir, ggufName string) {
	if strings.HasSuffix(strings.ToLower(u), ".gguf") {
		ggufName = path.Base(u)
		return strings.TrimSuffix(u, ggufName), ggufName
	}
	if !strings.HasSuffix(u, "/") {
		u += "/"
	}
	return u, ""
}

// opener reads the model's files under url: through opts.fetchFile (the
// worker's fetcher) when there is one, else by plain fetch; each file
// opened is added to files.
func opener(url string, opts js.Value, files *[]*jsSource) safetensors.Opener {
	var fetchFile js.Value
	if opts.Type() == js.TypeObject && opts.Get("fetchFile").Type() == js.TypeFunction {
		fetchFile = opts.Get("fetchFile")
	}
	return func(name string) (safetensors.Source, error) {
		fetch := func() (js.Value, error) {
			if fetchFile.IsUndefined() {
				return fetchArray(url + name)
			}
			return callFetchFile(fetchFile, name)
		}
		v, err := fetch()
		if err != nil {
			return nil, err
		}
		f, err := newJSSource(name, v, fetch)
		if err != nil {
			return nil, err
		}
		*files = append(*files, f)
		return f, nil
	}
}

// callFetchFile asks the worker's fetcher for a file: a Uint8Array, a
// file in parts ({size, parts, read}: newJSSource), or null when the model
// has no such file.
func callFetchFile(fetchFile js.Value, name string) (js.Value, error) {
	v, err := await(fetchFile.Invoke(name))
	if err != nil {
		return js.Value{}, err
	}
	if v.IsNull() || v.IsUndefined() {
		return js.Value{}, &fs.PathError{Op: "fetch", Path: name, Err: fs.ErrNotExist}
	}
	return v, nil
}

// fetchArray fetches url with plain fetch into a Uint8Array; a 404 is
// fs.ErrNotExist.
func fetchArray(url string) (js.Value, error) {
	resp, err := await(js.Global().Call("fetch", url))
	if err != nil {
		return js.Value{}, fmt.Errorf("fetching %s: %w", url, err)
	}
	if st := resp.Get("status").Int(); st == 404 {
		return js.Value{}, &fs.PathError{Op: "fetch", Path: url, Err: fs.ErrNotExist}
	} else if !resp.Get("ok").Bool() {
		return js.Value{}, fmt.Errorf("fetching %s: HTTP status %d", url, st)
	}
	buf, err := await(resp.Call("arrayBuffer"))
	if err != nil {
		return js.Value{}, fmt.Errorf("reading %s: %w", url, err)
	}
	return js.Global().Get("Uint8Array").New(buf), nil
}

// generate(request, onToken) → Promise<stats>. request: {prompt | tokens,
// images, maxTokens, temperature, topK, topP, minP, repetitionPenalty,
// seed, logitBias}.
func (h *host) generate(_ js.Value, args []js.Value) any {
	req, onToken := arg(args, 0), arg(args, 1)
	return promise(func() (any, error) {
		e := h.engine()
		if e == nil {
			return nil, errors.New("generate: no model is loaded")
		}
		if req.Type() != js.TypeObject {
			return nil, errors.New("generate: the request must be an object")
		}
		if onToken.Type() != js.TypeFunction {
			return nil, errors.New("generate: onToken must be a function")
		}
		opt, err := parseRequest(req)
		if err != nil {
			return nil, err
		}
		// request.live: the live routing/state view, passed to onToken as
		// a third argument (a snapshot at most every liveEvery) and
		// returned in stats.live at the end
		var live *engine.LiveView
		if req.Get("live").Truthy() {
			live = engine.NewLiveView(e.Cfg, liveWindow, liveSteps)
			opt.Live = live
		}
		var lastLive time.Time
		ctx, done := h.begin()
		defer done()
		y := newYielder()
		defer y.close()
		emitted := false
		emit := func(p engine.Piece) bool {
			emitted = true
			if live != nil && time.Since(lastLive) >= liveEvery {
				lastLive = time.Now()
				snap, err := toJS(live.View())
				if err == nil {
					onToken.Invoke(p.ID, p.Text, snap)
				} else {
					onToken.Invoke(p.ID, p.Text)
				}
			} else {
				onToken.Invoke(p.ID, p.Text)
			}
			y.maybe(10 * time.Millisecond) // let a cancel message in
			return ctx.Err() == nil
		}
		st, err := e.Generate(ctx, opt, emit)
		if err != nil && !emitted && errors.Is(err, errGPULost) {
			// the device was lost before this generation produced a token:
			// run it again, on the CPU under backend "auto" (the engine's
			// runner factory switches), else failing with the same cause
			st, err = e.Generate(ctx, opt, emit)
		}
		if err != nil {
			return nil, err
		}
		if live == nil {
			return toJS(st)
		}
		return toJS(struct {
			engine.Stats
			Live engine.LiveSnapshot `json:"live"`
		}{st, live.View()})
	})
}

// The page's live view: a routing window of liveWindow tokens, the last
// liveSteps steps, a snapshot at most every liveEvery while generating.
const (
	liveWindow = 64
	liveSteps  = 96
	liveEvery  = 50 * time.Millisecond
)

// parseRequest reads the generation options, naming a bad field.
func parseRequest(req js.Value) (engine.Options, error) {
	var o engine.Options
	num := func(name string, def float64) (float64, error) {
		v := req.Get(name)
		if v.IsUndefined() || v.IsNull() {
			return def, nil
		}
		if v.Type() != js.TypeNumber || math.IsNaN(v.Float()) {
			return 0, fmt.Errorf("generate: %s must be a number, got %s", name, v.Type())
		}
		return v.Float(), nil
	}
	if p := req.Get("prompt"); p.Type() == js.TypeString {
		o.Prompt = p.String()
	} else if !p.IsUndefined() && !p.IsNull() {
		return o, fmt.Errorf("generate: prompt must be a string, got %s", p.Type())
	}
	if t := req.Get("tokens"); !t.IsUndefined() && !t.IsNull() {
		n := t.Get("length")
		if n.Type() != js.TypeNumber {
			return o, errors.New("generate: tokens must be an array of token ids")
		}
		for i := 0; i < n.Int(); i++ {
			v := t.Index(i)
			if v.Type() != js.TypeNumber || v.Float() != math.Trunc(v.Float()) {
				return o, fmt.Errorf("generate: tokens[%d] is not an integer", i)
			}
			o.Tokens = append(o.Tokens, v.Int())
		}
	}
	if im := req.Get("images"); !im.IsUndefined() && !im.IsNull() {
		var err error
		if o.Images, err = parseImages(im); err != nil {
			return o, err
		}
	}
	msgs, err := parseMessages(req.Get("messages"))
	if err != nil {
		return o, err
	}
	if msgs != nil {
		o.Chat = &chat.Input{Messages: msgs}
	}
	if st := req.Get("stop"); !st.IsUndefined() && !st.IsNull() {
		if !js.Global().Get("Array").Call("isArray", st).Bool() {
			return o, errors.New("generate: stop must be an array of strings")
		}
		for i := 0; i < st.Length(); i++ {
			if st.Index(i).Type() != js.TypeString {
				return o, fmt.Errorf("generate: stop[%d] is not a string", i)
			}
			o.Stop = append(o.Stop, st.Index(i).String())
		}
	}
	if lb := req.Get("logitBias"); !lb.IsUndefined() && !lb.IsNull() {
		if o.Sampler.LogitBias, err = parseLogitBias(lb); err != nil {
			return o, err
		}
	}
	if sc := req.Get("jsonSchema"); !sc.IsUndefined() && !sc.IsNull() {
		raw := js.Global().Get("JSON").Call("stringify", sc).String()
		if o.Grammar, err = grammar.Schema([]byte(raw)); err != nil {
			return o, fmt.Errorf("generate: %w", err)
		}
	} else if req.Get("json").Truthy() {
		o.Grammar = grammar.JSONObject()
	}
	fields := []struct {
		name string
		def  float64
		set  func(float64)
	}{
		{"maxTokens", 128, func(v float64) { o.MaxTokens = int(v) }},
		{"temperature", 0, func(v float64) { o.Sampler.Temperature = float32(v) }},
		{"topK", 0, func(v float64) { o.Sampler.TopK = int(v) }},
		{"topP", 1, func(v float64) { o.Sampler.TopP = float32(v) }},
		{"minP", 0, func(v float64) { o.Sampler.MinP = float32(v) }},
		{"repetitionPenalty", 1, func(v float64) { o.Sampler.RepetitionPenalty = float32(v) }},
		{"seed", 1, func(v float64) { o.Sampler.Seed = uint64(v) }},
	}
	for _, f := range fields {
		v, err := num(f.name, f.def)
		if err != nil {
			return o, err
		}
		if (f.name == "seed" || f.name == "maxTokens" || f.name == "topK") && (v < 0 || v != math.Trunc(v)) {
			return o, fmt.Errorf("generate: %s must be a non-negative integer, got %g", f.name, v)
		}
		f.set(v)
	}
	return o, nil
}

// parseLogitBias reads request.logitBias, {tokenId: bias} (OpenAI's
// logit_bias); the engine checks the ids and biases.
func parseLogitBias(v js.Value) ([]generate.TokenBias, error) {
	if v.Type() != js.TypeObject || js.Global().Get("Array").Call("isArray", v).Bool() {
		return nil, errors.New("generate: logitBias must be an object {tokenId: bias}")
	}
	keys := js.Global().Get("Object").Call("keys", v)
	out := make([]generate.TokenBias, 0, keys.Length())
	for i := 0; i < keys.Length(); i++ {
		k := keys.Index(i).String()
		id, err := strconv.Atoi(k)
		if err != nil {
			return nil, fmt.Errorf("generate: logitBias key %q is not a token id", k)
		}
		b := v.Get(k)
		if b.Type() != js.TypeNumber {
			return nil, fmt.Errorf("generate: logitBias[%s] must be a number, got %s", k, b.Type())
		}
		out = append(out, generate.TokenBias{ID: id, Bias: float32(b.Float())})
	}
	return out, nil
}

// prefixCacheBytes is the prefix cache's budget in the browser.
const prefixCacheBytes = 64 << 20

// parseMessages reads request.messages: [{role, content, images}], each
// message's images ahead of its text (chat.WithImages).
func parseMessages(v js.Value) ([]chat.Message, error) {
	if v.IsUndefined() || v.IsNull() {
		return nil, nil
	}
	if !js.Global().Get("Array").Call("isArray", v).Bool() {
		return nil, errors.New("messages must be an array of {role, content, images}")
	}
	out := make([]chat.Message, v.Length())
	for i := range out {
		m := v.Index(i)
		role, content := m.Get("role"), m.Get("content")
		if role.Type() != js.TypeString || content.Type() != js.TypeString {
			return nil, fmt.Errorf("messages[%d] needs string role and content", i)
		}
		images := 0
		if n := m.Get("images"); n.Type() == js.TypeNumber {
			if n.Int() < 0 {
				return nil, fmt.Errorf("messages[%d].images must be ≥ 0", i)
			}
			images = n.Int()
		}
		out[i] = chat.Message{Role: role.String(), Content: chat.WithImages(images, content.String())}
	}
	return out, nil
}

// saveSession({messages | chat, images}) → Promise<Uint8Array>: the conversation
// and the sequence state its last reply left in the prefix cache
// (engine.SaveConversation), for the page to keep in OPFS or Cache
// Storage.
func (h *host) saveSession(_ js.Value, args []js.Value) any {
	req := arg(args, 0)
	return promise(func() (any, error) {
		e := h.engine()
		if e == nil {
			return nil, errors.New("saveSession: no model is loaded")
		}
		if req.Type() != js.TypeObject {
			return nil, errors.New("saveSession: want {messages, images}")
		}
		var conv engine.Conversation
		if cm := req.Get("chat"); cm.Type() == js.TypeString {
			// chat.completions messages (OpenAI's shape), as JSON
			if err := json.Unmarshal([]byte(cm.String()), &conv.Messages); err != nil {
				return nil, fmt.Errorf("saveSession: the messages: %w", err)
			}
		} else {
			msgs, err := parseMessages(req.Get("messages"))
			if err != nil {
				return nil, fmt.Errorf("saveSession: %w", err)
			}
			conv.Messages = msgs
		}
		if im := req.Get("images"); !im.IsUndefined() && !im.IsNull() {
			imgs, err := parseImages(im)
			if err != nil {
				return nil, err
			}
			conv.Images = imgs
		}
		b, err := e.SaveConversation(conv)
		if err != nil {
			return nil, fmt.Errorf("saveSession: %w", err)
		}
		out := js.Global().Get("Uint8Array").New(len(b))
		js.CopyBytesToJS(out, b)
		return out, nil
	})
}

// restoreSession(Uint8Array) → Promise<{messages}>: puts a saved state in
// the prefix cache (engine.RestoreConversation); the messages come back in
// chat.completions' shape (content a string, or parts when it had images).
func (h *host) restoreSession(_ js.Value, args []js.Value) any {
	data := arg(args, 0)
	return promise(func() (any, error) {
		e := h.engine()
		if e == nil {
			return nil, errors.New("restoreSession: no model is loaded")
		}
		if data.Type() != js.TypeObject || data.Get("length").Type() != js.TypeNumber {
			return nil, errors.New("restoreSession: want a Uint8Array")
		}
		b := make([]byte, data.Get("length").Int())
		js.CopyBytesToGo(b, data)
		c, err := e.RestoreConversation(b)
		if err != nil {
			return nil, fmt.Errorf("restoreSession: %w", err)
		}
		return toJS(struct {
			Messages []chat.Message `json:"messages"`
		}{c.Messages})
	})
}

func (h *host) engine() *engine.Engine {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.eng
}

// parseImages reads request.images: [{rgba, width, height}], checking each
// size against engine.ImageLimits before copying its pixels.
func parseImages(v js.Value) ([]engine.Image, error) {
	if !js.Global().Get("Array").Call("isArray", v).Bool() {
		return nil, fmt.Errorf("generate: images must be an array of {rgba, width, height}, got %s", v.Type())
	}
	u8, u8c := js.Global().Get("Uint8Array"), js.Global().Get("Uint8ClampedArray")
	n := v.Length()
	out := make([]engine.Image, n)
	for i := range n {
		im := v.Index(i)
		if im.Type() != js.TypeObject {
			return nil, fmt.Errorf("generate: images[%d] must be an object {rgba, width, height}, got %s", i, im.Type())
		}
		var wh [2]int
		for j, name := range []string{"width", "height"} {
			d := im.Get(name)
			if d.Type() != js.TypeNumber || d.Float() != math.Trunc(d.Float()) || d.Float() < 1 || d.Float() > math.MaxInt32 {
				return nil, fmt.Errorf("generate: images[%d].%s must be a positive integer, got %s", i, name, js.Global().Call("String", d).String())
			}
			wh[j] = d.Int()
		}
		w, h := wh[0], wh[1]
		if err := imageio.CheckLimits(w, h, engine.ImageLimits); err != nil {
			return nil, fmt.Errorf("generate: images[%d]: %w", i, err)
		}
		px := im.Get("rgba")
		if !px.InstanceOf(u8) && !px.InstanceOf(u8c) {
			return nil, fmt.Errorf("generate: images[%d].rgba must be a Uint8Array or Uint8ClampedArray of RGBA pixels", i)
		}
		if got := px.Length(); got != w*h*4 {
			return nil, fmt.Errorf("generate: images[%d].rgba has %d bytes, a %dx%d RGBA image needs %d", i, got, w, h, w*h*4)
		}
		out[i] = engine.Image{Width: w, Height: h, RGBA: make([]byte, w*h*4)}
		js.CopyBytesToGo(out[i].RGBA, px)
	}
	return out, nil
}

// cancel() stops the running generation (if any) after its current token.
func (h *host) cancelGen(js.Value, []js.Value) any {
	h.mu.Lock()
	if h.cancel != nil {
		h.cancel()
	}
	h.mu.Unlock()
	return nil
}

// info() → Promise<info>.
func (h *host) info(js.Value, []js.Value) any {
	return promise(h.infoValue)
}

// infoValue is the model's engine.Info plus the adapter probe.
func (h *host) infoValue() (any, error) {
	e := h.engine()
	if e == nil {
		return nil, errors.New("info: no model is loaded")
	}
	if h.gpu == nil {
		g := probeGPU()
		h.gpu = &g
	}
	h.gpu.Errors = gpuErrors
	chatTemplate := e.Chat().Source
	kernels := cpuKernels()
	return toJS(struct {
		engine.Info
		Adapter *gpuInfo `json:"adapter"`
		// ChatTemplate: where chat.completions.create's template comes
		// from (a file name, or the built-in Kimi format).
		ChatTemplate string `json:"chatTemplate"`
		// CPUKernels: what runs the CPU path's matrix products
		// (core/ref's WebAssembly SIMD128 module, or pure Go and why).
		CPUKernels string `json:"cpuKernels"`
		// GPURunner: whether this bundle has the WebGPU runner
		// (tessera.wasm) or is the CPU-only one (tessera-cpu.wasm).
		GPURunner bool `json:"gpuRunner"`
	}{e.Info(), h.gpu, chatTemplate, kernels, haveGPURunner})
}

// dispose() frees the model; generate then fails until load is called.
func (h *host) dispose(js.Value, []js.Value) any {
	h.mu.Lock()
	e := h.eng
	h.eng = nil
	if h.cancel != nil {
		h.cancel()
	}
	h.mu.Unlock()
	if e != nil {
		e.Close()
		// A wasm heap never shrinks. Collected now, the engine's memory is
		// reused by the next load in this instance (a shared worker's, or a
		// reloaded tab's that finds the shared worker still running);
		// otherwise that load grew the heap past it: 593–657 MiB against
		// 503 MiB for k3-mini Q8_0.
		runtime.GC()
	}
	return nil
}
