package model

import (
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"time"

	"github.com/tessera-llm/tessera/core/half"
	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Probe is one weight type's measured decode product speed.
type Probe struct {
	Type  tensor.DType
	Bytes int64   // bytes of this type read per decoded token
	Rate  float64 // bytes per second the decode products stream for one token
	// Measured is false for a type too rare to time (under 2 % of a
	// token's reads), counted at the main type's rate.
	Measured bool
}

// Estimate is a decode speed predicted from this machine's measured kernels.
type Estimate struct {
	// TokPerSec is 1 / Σ_type bytes/rate: the time to stream one token's
	// weights through the decode products (ref.LinearBatch of one token), with
	// the KDA state (read and written) and the MLA cache at the context
	// asked for counted as float32 reads. The rest of a step (the
	// recurrence's arithmetic, routing, norms, sampling) is left out, so
	// it is an upper bound, near where the products dominate: BENCHMARKS.md
	// compares it with measured decode.
	TokPerSec float64
	Context   int64
	Probes    []Probe // by type, most bytes first
	Took      time.Duration
}

// probeMaxBytes caps the weights one type's probe streams: more than a
// client CPU's last-level cache, so a model that does not fit in the
// cache is measured from memory, as it decodes (on the 2-core development
// VM, whose cache is large, a 64 MiB probe read 35 % faster than a
// 256 MiB one, and 1 GiB as fast as 256 MiB).
const probeMaxBytes = 256 << 20

// EstimateDecode predicts n's decode speed at a context of ctx tokens on
// pool p (nil: one worker, as in the browser) by timing one-token products over
// matrices of each type that carries at least 2 % of a token's reads
// (hidden-size columns, as many bytes as the model has up to
// probeMaxBytes, so a model small enough to stay in the cache is measured
// in the cache too; random values) for about per each. It allocates those
// weights for the duration of the call.
func EstimateDecode(n Needs, hidden int, p *ref.Pool, ctx int64, per time.Duration) Estimate {
	start := time.Now()
	e := Estimate{Context: ctx}
	reads := maps.Clone(n.Decode)
	if mem := 2*n.KDAStateBytes + ctx*n.CacheBytesPerTok; mem > 0 {
		reads[tensor.F32] += mem
	}
	order := Needs{Decode: reads}.DecodeTypes()
	var total int64
	for _, b := range reads {
		total += b
	}
	if total <= 0 {
		return e
	}
	size := min(probeMaxBytes, max(4<<20, n.Weights))
	var secs float64
	for _, t := range order {
		pr := Probe{Type: t, Bytes: reads[t], Measured: reads[t]*50 >= total || len(e.Probes) == 0}
		if pr.Measured {
			pr.Rate = probeRate(t, hidden, size, p, per)
			// one probe's weights at a time: a wasm heap never shrinks
			runtime.GC()
		} else {
			pr.Rate = e.Probes[0].Rate
		}
		if pr.Rate > 0 {
			secs += float64(pr.Bytes) / pr.Rate
		}
		e.Probes = append(e.Probes, pr)
	}
	if secs > 0 {
		e.TokPerSec = 1 / secs
	}
	e.Took = time.Since(start)
	return e
}

// probeBatch is how many products the probe runs in one parallel region.
const probeBatch = 8

// probeRate times one-token products (ref.LinearBatch) over about size
// bytes of type t weights with cols columns (rounded up to a whole number
// of 256-element blocks), in batches of probeBatch matrices of one input
// — as a decode step runs a token's selected experts and its projections
// of one vector: one parallel region, the input quantized once for the
// integer kernels — going through all of them in turn, so each batch
// streams from wherever the whole lies (memory, for more than a cache
// holds). After one pass to warm up it makes passes until per has gone by
// (two at least) and returns the bytes over the time they took, stalls
// included, as a decode step has them. (The median batch's time, which
// leaves out stalls, read 1.3–3× measured decode in Chromium against
// 1.0–1.7× for this.)
func probeRate(t tensor.DType, cols int, size int64, p *ref.Pool, per time.Duration) float64 {
	cols = max(256, (cols+255)/256*256)
	const rows = 256
	var rowBytes int
	switch {
	case t.Blocked():
		rowBytes = t.RowBytes(cols)
	case t == tensor.Q8:
		rowBytes = cols + 4
	default:
		rowBytes = cols * t.Size()
	}
	rng := rngFor(t)
	mats := make([]*tensor.Mat, probeBatch*max(1, int(size/int64(probeBatch*rows*rowBytes))))
	mats[0] = probeMat(t, rows, cols, rng)
	for i := 1; i < len(mats); i++ {
		mats[i] = copyMat(mats[0]) // its own memory: the same values
	}
	x := make([]float32, cols)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	out := make([]float32, probeBatch*rows)
	batches := make([][]ref.GEMV, len(mats)/probeBatch)
	for b := range batches {
		for k, m := range mats[b*probeBatch : (b+1)*probeBatch] {
			batches[b] = append(batches[b], ref.GEMV{W: m, X: x, Out: out[k*rows : (k+1)*rows]})
		}
	}
	for _, gs := range batches {
		ref.LinearBatch(p, gs)
	}
	var passes int
	t0 := time.Now()
	for passes < 2 || time.Since(t0) < per {
		for _, gs := range batches {
			ref.LinearBatch(p, gs)
		}
		passes++
	}
	return float64(passes*len(mats)*rows*rowBytes) / time.Since(t0).Seconds()
}

// rngFor is the probe's random source for type t.
func rngFor(t tensor.DType) *rand.Rand { return rand.New(rand.NewPCG(1, uint64(t))) }

// probeMat is a rows×cols matrix of type t with random values: halves
// and int8 in a unit range, blocks of random codes with their scales set
// to 0.01 (random scale bits would hold NaNs and subnormals, which some
// CPUs compute slower).
func probeMat(t tensor.DType, rows, cols int, rng *rand.Rand) *tensor.Mat {
	n := rows * cols
	switch t {
	case tensor.F32:
		v := make([]float32, n)
		for i := range v {
			v[i] = rng.Float32()*2 - 1
		}
		return tensor.NewF32(rows, cols, v)
	case tensor.F16, tensor.BF16:
		v := make([]uint16, n)
		for i := range v {
			f := rng.Float32()*2 - 1
			if t == tensor.F16 {
				v[i] = half.F32ToF16(f)
			} else {
				v[i] = half.F32ToBF16(f)
			}
		}
		return tensor.NewHalf(rows, cols, t, v)
	case tensor.Q8:
		v, s := make([]int8, n), make([]float32, rows)
		for i := range v {
			v[i] = int8(rng.IntN(255) - 127)
		}
		for i := range s {
			s[i] = 0.01
		}
		return tensor.NewQ8(rows, cols, v, s)
	}
	q := make([]byte, rows*t.RowBytes(cols))
	for i := range q {
		q[i] = byte(rng.Uint32())
	}
	bb, scale := t.BlockBytes(), half.F32ToF16(0.01)
	for b := 0; b < len(q); b += bb {
		switch t {
		case tensor.MXFP4:
			q[b] = 120 // E8M0: 2^-7
		case tensor.Q6K:
			q[b+208], q[b+209] = byte(scale), byte(scale>>8)
		default:
			q[b], q[b+1] = byte(scale), byte(scale>>8)
			if t == tensor.Q4_1 || t == tensor.Q5_1 || t == tensor.Q4K || t == tensor.Q5K {
				q[b+2], q[b+3] = byte(scale), byte(scale>>8) // the min
			}
		}
	}
	m, err := tensor.NewBlocked(rows, cols, t, q)
	if err != nil {
		panic(err) // cols is a whole number of blocks of every format
	}
	return m
}

// copyMat is m with its data copied.
func copyMat(m *tensor.Mat) *tensor.Mat {
	c := *m
	c.F32, c.U16, c.I8, c.Q = slices.Clone(m.F32), slices.Clone(m.U16), slices.Clone(m.I8), slices.Clone(m.Q)
	return &c
}
