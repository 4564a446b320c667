//go:build js && wasm

package main

import (
	"errors"
	"fmt"
	"syscall/js"
	"time"

	"github.com/tessera-llm/tessera/core/config"
	"github.com/tessera-llm/tessera/core/engine"
	"github.com/tessera-llm/tessera/core/model"
)

// checkReport is what check answers (Tessera.check's report, before the
// worker adds the download and storage figures).
type checkReport struct {
	Architecture string `json:"architecture"`
	Layout       string `json:"layout"`
	Params       int64  `json:"params"`       // every weight, the vision tower's too
	ActiveParams int64  `json:"activeParams"` // used for one text token
	WeightBytes  int64  `json:"weightBytes"`  // the text model's tensors
	VisionBytes  int64  `json:"visionBytes"`  // the vision tower's (fetched on the first image)
	// DecodeBytes is the weight bytes read per decoded token, DecodeTypes
	// the same by the type they are multiplied in.
	DecodeBytes        int64            `json:"decodeBytesPerToken"`
	DecodeTypes        map[string]int64 `json:"decodeBytesByType"`
	StateBytes         int64            `json:"stateBytes"`         // KDA state, constant in context
	CacheBytesPerToken int64            `json:"cacheBytesPerToken"` // MLA latent cache
	MaxContext         int              `json:"maxContext"`         // the model's
	Context            int64            `json:"context"`            // the context the memory and speed figures are for
	// MemoryBytes is weights + state + cache at Context tokens: what the
	// CPU path holds in the wasm heap, of at most HeapLimit.
	MemoryBytes int64 `json:"memoryBytes"`
	HeapLimit   int64 `json:"heapLimit"`
	FitsCPU     bool  `json:"fitsCPU"`
	CPU         struct {
		DecodeTokPerSec float64       `json:"decodeTokPerSec"`
		Kernels         []checkKernel `json:"kernels"`
		Ms              float64       `json:"ms"`
		Kernel          string        `json:"kernel"` // what runs the products
	} `json:"cpu"`
	// Auto is the backend backend 'auto' takes in this browser, and why.
	Auto struct {
		Backend string `json:"backend"`
		Reason  string `json:"reason"`
	} `json:"auto"`
	Adapter gpuInfo `json:"adapter"`
}

// checkKernel is one weight type's measured decode product speed.
type checkKernel struct {
	Type     string  `json:"type"`
	Bytes    int64   `json:"bytesPerToken"`
	GBps     float64 `json:"gbPerSec"`
	Measured bool    `json:"measured"` // false: too rare to time, counted at the main type's rate
}

// check(modelURL, {fetchFile, context, probeMs, allowSoftwareAdapter}) →
// Promise<report>: the model's checks and figures from its headers alone
// (engine.Check: nothing past them is read; the worker's fetchFile reads
// them by range), its decode speed on this CPU estimated by timing this
// bundle's products (model.EstimateDecode) for about probeMs (150) per
// weight type, and the backend 'auto' would choose. context (4096) is the
// context the memory and speed figures are for.
func check(_ js.Value, args []js.Value) any {
	base, opts := arg(args, 0), arg(args, 1)
	return promise(func() (any, error) {
		if base.Type() != js.TypeString {
			return nil, errors.New("check: the model URL must be a string")
		}
		ctx, probe := int64(model.HeapContext), 150*time.Millisecond
		allowSoftware := false
		if opts.Type() == js.TypeObject {
			if v := opts.Get("context"); !v.IsUndefined() {
				if v.Type() != js.TypeNumber || v.Float() < 1 || v.Float() != float64(int64(v.Float())) {
					return nil, fmt.Errorf("check: context must be a positive whole number of tokens, not %s %s", v.Type(), js.Global().Get("String").Invoke(v).String())
				}
				ctx = int64(v.Float())
			}
			if v := opts.Get("probeMs"); v.Type() == js.TypeNumber && v.Float() > 0 {
				probe = time.Duration(v.Float() * float64(time.Millisecond))
			}
			allowSoftware = opts.Get("allowSoftwareAdapter").Truthy()
		}
		url, ggufName := modelPath(base.String())
		var files []*jsSource
		open := opener(url, opts, &files)
		defer func() {
			for _, f := range files {
				f.release()
			}
		}()
		var cfg *config.Config
		var n model.Needs
		var err error
		if ggufName == "" {
			cfg, n, err = engine.Check(open)
		} else {
			src, oerr := open(ggufName)
			if oerr != nil {
				return nil, fmt.Errorf("checking the model at %s: %w", url+ggufName, oerr)
			}
			cfg, n, err = engine.CheckGGUF(src)
		}
		if err != nil {
			return nil, fmt.Errorf("checking the model at %s: %w", url+ggufName, err)
		}
		if most := int64(cfg.MaxPositions); most > 0 && ctx > most {
			return nil, fmt.Errorf("check: context %d is more than the model's %d tokens", ctx, most)
		}
		var r checkReport
		r.Architecture, r.Layout = cfg.Summary(), cfg.Layout.String()
		r.Params, r.ActiveParams = n.TotalParams, n.ActiveParams
		r.WeightBytes, r.VisionBytes = n.Weights, n.Vision
		r.DecodeBytes, r.DecodeTypes = n.DecodeBytes(), map[string]int64{}
		for t, b := range n.Decode {
			r.DecodeTypes[t.String()] = b
		}
		r.StateBytes, r.CacheBytesPerToken, r.MaxContext = n.KDAStateBytes, n.CacheBytesPerTok, cfg.MaxPositions
		r.Context, r.MemoryBytes, r.HeapLimit = ctx, n.Memory(ctx), model.HeapLimit
		r.FitsCPU = r.MemoryBytes <= r.HeapLimit
		est := model.EstimateDecode(n, cfg.HiddenSize, nil, ctx, probe)
		r.CPU.DecodeTokPerSec, r.CPU.Ms = est.TokPerSec, float64(est.Took.Microseconds())/1e3
		for _, p := range est.Probes {
			r.CPU.Kernels = append(r.CPU.Kernels, checkKernel{Type: p.Type.String(), Bytes: p.Bytes, GBps: p.Rate / 1e9, Measured: p.Measured})
		}
		r.CPU.Kernel = cpuKernels()
		r.Adapter = probeGPU()
		choice := autoChoice(r.Adapter, allowSoftware)
		r.Auto.Backend, r.Auto.Reason = "cpu", choice.Reason
		if choice.GPU {
			r.Auto.Backend = "gpu"
		}
		return toJS(r)
	})
}
