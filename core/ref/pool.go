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
	"sync/atomic"
	"time"
)

// Job is a unit of data-parallel work over an index range [lo, hi).
// Implementations are small structs owned by the caller, so handing one to a
// Pool does not allocate.
type Job interface {
	Run(worker, lo, hi int)
}

// Pool runs Jobs on a fixed set of goroutines. A Pool is used by one
// sequence of ops at a time (it is not safe for concurrent For calls).
//
// A decode step is a few hundred short parallel regions, so waking workers
// through the scheduler (tens of microseconds each) would cost more than
// the work: workers spin on a generation counter for up to spinWait after
// their last job and only then park on a channel, and the caller spins as
// long for the workers to finish before it parks too. An idle pool parks
// within spinWait and burns no CPU.
//
// On a busy machine spinning loses: a spinning thread takes the core a
// descheduled worker needs. The caller counts the regions in which a
// worker had not even started its part when the spin ran out (a worker that
// has started is just busy, and the caller keeps polling for it); when more
// than a quarter of a window of regions did,
// the pool stops spinning (park at once, as a plain channel pool) for a
// number of windows that doubles with each failed retry, then tries
// spinning again.
type Pool struct {
	n int
	// gen is bumped once per dispatched For; spans[w] is worker w's part.
	gen   atomic.Uint32
	spans []span
	// left counts the workers that have not finished the current For.
	left atomic.Int32
	// parked[w] is set while worker w sleeps on wake[w].
	parked []atomic.Bool
	wake   []chan struct{}
	quit   atomic.Bool
	// started counts the workers that have picked up the current For.
	started atomic.Int32
	// callerParked is set while the caller of For sleeps on done.
	callerParked atomic.Bool
	done         chan struct{}
	// spin is the current spin budget (0: park at once); the rest is the
	// caller's bookkeeping of it (see the type's doc).
	spin                   atomic.Int64
	regions, missed        int
	blockWindows, backoffs int

	// rows is per-worker scratch for widening half-precision weight rows.
	rows [][]float32
	// act and acts hold activations quantized for the integer block
	// kernels (Linear's; LinearBatch's, one per distinct input).
	act    actQ8
	acts   []actQ8
	actIdx []int
	// One instance of each parallel op's job, reused so that running an op
	// allocates nothing.
	lin   linearJob
	batch batchJob
	q8    q8Job
	attn  attnJob
	kda   kdaJob
	gqa   gqaJob
}

type span struct {
	job    Job
	lo, hi int
}

// spinWait is how long an idle worker polls for the next job before it
// parks (and how long the caller polls before yielding its thread).
const spinWait = 20 * time.Microsecond

// spinBusy is how long the caller polls while every worker is running its
// part (a large, slightly unbalanced region) before it parks.
const spinBusy = 2 * time.Millisecond

// spinWindow is the number of regions over which the caller judges
// whether spinning pays.
const spinWindow = 64

// NewPool starts a pool of n workers (n ≤ 0: GOMAXPROCS). Worker 0 is the
// calling goroutine, so a pool of one worker runs everything inline.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: n, spans: make([]span, n), parked: make([]atomic.Bool, n), wake: make([]chan struct{}, n), done: make(chan struct{}, 1)}
	p.spin.Store(int64(spinWait))
	for w := 1; w < n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
	return p
}

// worker runs worker w's span of each generation until the pool closes.
func (p *Pool) worker(w int) {
	var seen uint32 // generation 0: no job yet (For may run before we start)
	for {
		if !p.await(w, seen) {
			return
		}
		seen = p.gen.Load()
		p.started.Add(1)
		if s := p.spans[w]; s.lo < s.hi {
			s.job.Run(w, s.lo, s.hi)
		}
		// The last one out wakes a parked caller (same protocol as await:
		// the caller sets callerParked before it re-reads left).
		if p.left.Add(-1) == 0 && p.callerParked.Load() {
			select {
			case p.done <- struct{}{}:
			default:
			}
		}
	}
}

// await returns once the generation differs from seen (true) or the pool
// is closed (false): spinning for the pool's spin budget, then parked on
// wake[w].
func (p *Pool) await(w int, seen uint32) bool {
	var t0 time.Time
	for i := 0; ; i++ {
		if p.quit.Load() {
			return false
		}
		if p.gen.Load() != seen {
			return true
		}
		budget := time.Duration(p.spin.Load())
		if budget > 0 && i&63 != 63 {
			spinPause()
			continue
		}
		if budget > 0 && t0.IsZero() {
			t0 = time.Now()
			continue
		}
		if budget > 0 && time.Since(t0) < budget {
			continue
		}
		// Park. The caller bumps gen before it reads parked, and we set
		// parked before we re-read gen, so one of us sees the other.
		p.parked[w].Store(true)
		if p.gen.Load() == seen && !p.quit.Load() {
			<-p.wake[w]
		}
		p.parked[w].Store(false)
		t0 = time.Time{}
	}
}

// Workers is the number of workers; per-worker scratch is indexed by the
// worker argument of Job.Run, in [0, Workers()).
func (p *Pool) Workers() int { return p.n }

// Close stops the worker goroutines.
func (p *Pool) Close() {
	p.quit.Store(true)
	for w := 1; w < p.n; w++ {
		select {
		case p.wake[w] <- struct{}{}:
		default:
		}
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
	for w := 1; w < p.n; w++ {
		lo := min(w*step, n)
		p.spans[w] = span{job, lo, min(lo+step, n)}
		if w >= parts {
			p.spans[w] = span{}
		}
	}
	p.left.Store(int32(p.n - 1))
	p.started.Store(0)
	p.gen.Add(1)
	for w := 1; w < p.n; w++ {
		if p.parked[w].Load() {
			select {
			case p.wake[w] <- struct{}{}:
			default:
			}
		}
	}
	job.Run(0, 0, min(step, n))
	budget := time.Duration(p.spin.Load())
	var t0 time.Time
	missed := false
	for i := 0; p.left.Load() != 0; i++ {
		if budget > 0 && i&63 != 63 {
			spinPause()
			continue
		}
		if budget > 0 && t0.IsZero() {
			t0 = time.Now()
			continue
		}
		if budget > 0 {
			// Workers that have all started are running their parts: keep
			// polling (up to spinBusy). A worker that has not started
			// within the budget is waiting for a core: park, and count it.
			waited := time.Since(t0)
			if waited < budget || (waited < spinBusy && p.started.Load() == int32(p.n-1)) {
				continue
			}
		}
		missed = missed || (budget > 0 && p.started.Load() != int32(p.n-1))
		p.callerParked.Store(true)
		if p.left.Load() != 0 {
			<-p.done
		}
		p.callerParked.Store(false)
		t0 = time.Time{}
	}
	p.judgeSpin(missed)
	for w := 1; w < p.n; w++ {
		p.spans[w] = span{}
	}
}

// judgeSpin updates the spin budget after a region (missed: the caller's
// spin ran out before the workers finished); see Pool.
func (p *Pool) judgeSpin(missed bool) {
	p.regions++
	if missed {
		p.missed++
	}
	if p.regions < spinWindow {
		return
	}
	spinning := p.spin.Load() > 0
	switch {
	case spinning && p.missed > spinWindow/4:
		p.spin.Store(0)
		p.blockWindows = 1 << min(p.backoffs, 6)
		p.backoffs++
	case spinning:
		p.backoffs = 0
	case p.blockWindows > 1:
		p.blockWindows--
	default:
		p.spin.Store(int64(spinWait)) // try spinning again
	}
	p.regions, p.missed = 0, 0
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
