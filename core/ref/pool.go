// Package ref is the CPU reference of every op of the K3-class model: plain
// Go, float32 storage with float32 accumulation, each function's equation in
// its doc comment. It is the oracle every GPU kernel is tested against and
// the fallback backend when no GPU is present.
//
// Conventions: activations are row-major []float32 with one row per token;
// a linear weight W is a *tensor.Mat with Rows = out, Cols = in, so
// y = x·Wᵀ. Functions never allocate unless their doc says so; the caller
// passes the output and any scratch.
package ref

import (
	"runtime"
	"sync"
)

// Job is a unit of data-parallel work over an index range [lo, hi).
// Implementations are small structs owned by the caller, so handing one to a
// Pool does not allocate.
type Job interface {
	Run(worker, lo, hi int)
}

// Pool runs Jobs on a fixed set of goroutines. A Pool is used by one
// sequence of ops at a time (it is not safe for concurrent For calls).
type Pool struct {
	n     int
	start []chan span
	wg    sync.WaitGroup

	// rows is per-worker scratch for widening half-precision weight rows.
	rows [][]float32
	// One instance of each parallel op's job, reused so that running an op
	// allocates nothing.
	lin   linearJob
	batch batchJob
	attn  attnJob
	kda   kdaJob
}

type span struct {
	job    Job
	lo, hi int
}

// NewPool starts a pool of n workers (n ≤ 0: GOMAXPROCS). Worker 0 is the
// calling goroutine, so a pool of one worker runs everything inline.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: n, start: make([]chan span, n)}
	for w := 1; w < n; w++ {
		ch := make(chan span)
		p.start[w] = ch
		go func(w int) {
			for s := range ch {
				s.job.Run(w, s.lo, s.hi)
				p.wg.Done()
			}
		}(w)
	}
	return p
}

// Workers is the number of workers; per-worker scratch is indexed by the
// worker argument of Job.Run, in [0, Workers()).
func (p *Pool) Workers() int { return p.n }

// Close stops the worker goroutines.
func (p *Pool) Close() {
	for w := 1; w < p.n; w++ {
		close(p.start[w])
	}
}

// For splits [0, n) into contiguous pieces, at least grain long, runs job on
// each, and returns when all are done.
func (p *Pool) For(n, grain int, job Job) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	parts := (n + grain - 1) / grain
	if parts > p.n {
		parts = p.n
	}
	if parts <= 1 {
		job.Run(0, 0, n)
		return
	}
	step := (n + parts - 1) / parts
	p.wg.Add(parts - 1)
	for w := 1; w < parts; w++ {
		lo := w * step
		hi := min(lo+step, n)
		if lo >= hi {
			p.wg.Done()
			continue
		}
		p.start[w] <- span{job, lo, hi}
	}
	job.Run(0, 0, min(step, n))
	p.wg.Wait()
}

// rowScratch returns per-worker buffers of at least n floats, grown once.
func (p *Pool) rowScratch(n int) [][]float32 {
	if len(p.rows) == p.n && len(p.rows[0]) >= n {
		return p.rows
	}
	p.rows = make([][]float32, p.n)
	for i := range p.rows {
		p.rows[i] = make([]float32, n)
	}
	return p.rows
}

// poolOr returns p, or a fresh single-worker pool when p is nil (each call
// then allocates; pass a Pool on hot paths).
func poolOr(p *Pool) *Pool {
	if p == nil {
		return &Pool{n: 1}
	}
	return p
}
