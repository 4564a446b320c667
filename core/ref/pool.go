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
// A region's range is cut into chunks (a few per worker) that the caller
// and the workers claim one at a time from a shared ticket; the caller
// returns when every chunk is done. So a region whose rows cost unequal
// work (a batch of matrices of several formats and widths) stays balanced,
// and a worker that is late (parked, or waiting for a core) only takes
// fewer chunks: the caller never waits for a worker to start, only for
// chunks already running. A worker that wakes after its region has ended
// finds nothing to claim (or claims the next region's chunks).
//
// A decode step is a few hundred short parallel regions, so waking workers
// through the scheduler (tens of microseconds each) would lose most of
// them: workers spin on a generation counter for up to spinWait after
// their last chunk and only then park on a channel. An idle pool parks
// within spinWait and burns no CPU.
//
// On a busy machine spinning loses: a spinning thread takes the core a
// descheduled thread needs. The caller counts the regions of several
// chunks in which no worker claimed any (the workers were not running);
// when more than a quarter of a window of regions were such, the pool
// stops spinning (park at once, as a plain channel pool) for a number of
// windows that doubles with each failed retry, then tries spinning again.
type Pool struct {
	n int
	// gen is bumped once per dispatched For (what idle workers wait on).
	gen atomic.Uint32
	// ticket is the current region's generation (high 32 bits), its
	// number of chunks (16 bits) and the next chunk to claim (low 16
	// bits); done counts its finished chunks, helped those the workers
	// claimed. job, size and chunk describe it: job over [0, size) in
	// chunks of chunk indices (read only by holders of a claim).
	ticket      atomic.Uint64
	done        atomic.Int32
	helped      atomic.Int32
	job         Job
	size, chunk int
	// parked[w] is set while worker w sleeps on wake[w].
	parked []atomic.Bool
	wake   []chan struct{}
	quit   atomic.Bool
	// callerParked is set while the caller of For sleeps on doneCh.
	callerParked atomic.Bool
	doneCh       chan struct{}
	// spin is the current spin budget (0: park at once); the rest is the
	// caller's bookkeeping of it (see the type's doc).
	spin                   atomic.Int64
	regions, missed        int
	blockWindows, backoffs int

	// rows is per-worker scratch for widening half-precision weight rows;
	// tails, for the last rows of an integer GEMV that do not make a group
	// of four (rowsDotQ8: a local array there would escape to the heap
	// through the kernel call, one allocation per call).
	rows  [][]float32
	tails [][4]float32
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
	quant quantJob
	conv  convJob
	attn  attnJob
	kda   kdaJob
	gqa   gqaJob
}

// spinWait is how long an idle worker polls for the next job before it
// parks: longer than the serial stretches between a decode step's regions
// (up to ~40 µs on k3-mini: short convolutions, gates, norms, sampling),
// so a worker stays awake through a step instead of waiting for a wake-up
// (tens of microseconds on a VM) at the next region.
const spinWait = 50 * time.Microsecond

// spinBusy is how long the caller polls for chunks still running on
// workers before it parks.
const spinBusy = 2 * time.Millisecond

// spinWindow is the number of regions over which the caller judges
// whether spinning pays.
const spinWindow = 64

// chunksPerWorker is how many chunks a region's range is cut into per
// worker (when grain allows).
const chunksPerWorker = 4

// NewPool starts a pool of n workers (n ≤ 0: GOMAXPROCS). Worker 0 is the
// calling goroutine, so a pool of one worker runs everything inline.
func NewPool(n int) *Pool {
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	p := &Pool{n: n, parked: make([]atomic.Bool, n), wake: make([]chan struct{}, n), doneCh: make(chan struct{}, 1), tails: make([][4]float32, n)}
	p.spin.Store(int64(spinWait))
	for w := 1; w < n; w++ {
		p.wake[w] = make(chan struct{}, 1)
		go p.worker(w)
	}
	return p
}

// worker claims chunks of each region until the pool closes.
func (p *Pool) worker(w int) {
	var seen uint32 // generation 0: no job yet (For may run before we start)
	for {
		if !p.await(w, seen) {
			return
		}
		seen = p.gen.Load()
		p.runChunks(w)
	}
}

// claim takes the next chunk of the current region: its index range, or
// ok false when every chunk is taken. Once a chunk is claimed its region
// cannot end before the claimer reports it done, so job, size and chunk
// stay those of the claimed region.
func (p *Pool) claim() (lo, hi int, ok bool) {
	for {
		t := p.ticket.Load()
		next, chunks := t&0xffff, t>>16&0xffff
		if next >= chunks {
			return 0, 0, false
		}
		if p.ticket.CompareAndSwap(t, t+1) {
			lo = int(next) * p.chunk
			return lo, min(lo+p.chunk, p.size), true
		}
	}
}

// runChunks runs chunks of the current region on worker w until none is
// left; worker w runs its chunks one after another, so per-worker scratch
// indexed by w stays private.
func (p *Pool) runChunks(w int) {
	for {
		lo, hi, ok := p.claim()
		if !ok {
			return
		}
		if w > 0 {
			p.helped.Add(1)
		}
		p.job.Run(w, lo, hi)
		// The chunk that completes the region wakes a parked caller (the
		// caller sets callerParked before it re-reads done).
		if t := p.ticket.Load(); p.done.Add(1) == int32(t>>16&0xffff) && w > 0 && p.callerParked.Load() {
			select {
			case p.doneCh <- struct{}{}:
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

// For splits [0, n) into contiguous pieces, at least grain long (a
// multiple of four when longer than eight), runs job on each, and returns
// when all are done. Which worker runs which piece depends on timing, so
// a job's results must not depend on where the pieces are cut.
func (p *Pool) For(n, grain int, job Job) {
	if n <= 0 {
		return
	}
	if grain < 1 {
		grain = 1
	}
	parts := min((n+grain-1)/grain, p.n)
	if parts <= 1 {
		job.Run(0, 0, n)
		return
	}
	chunks := min((n+grain-1)/grain, parts*chunksPerWorker)
	chunk := (n + chunks - 1) / chunks
	if chunk > 8 {
		chunk = (chunk + 3) &^ 3
	}
	chunks = (n + chunk - 1) / chunk
	p.job, p.size, p.chunk = job, n, chunk
	p.done.Store(0)
	p.helped.Store(0)
	g := uint64(p.gen.Load() + 1)
	p.ticket.Store(g<<32 | uint64(chunks)<<16)
	p.gen.Store(uint32(g))
	for w := 1; w < p.n; w++ {
		if p.parked[w].Load() {
			select {
			case p.wake[w] <- struct{}{}:
			default:
			}
		}
	}
	p.runChunks(0)
	var t0 time.Time
	for i := 0; p.done.Load() != int32(chunks); i++ {
		// Chunks still running on workers: poll, then park.
		if i&63 != 63 {
			spinPause()
			continue
		}
		if t0.IsZero() {
			t0 = time.Now()
			continue
		}
		if time.Since(t0) < spinBusy {
			continue
		}
		p.callerParked.Store(true)
		if p.done.Load() != int32(chunks) {
			<-p.doneCh
		}
		p.callerParked.Store(false)
	}
	p.judgeSpin(chunks > 1 && p.helped.Load() == 0)
	p.job = nil
}

// judgeSpin updates the spin budget after a region (missed: no worker
// claimed a chunk of it); see Pool.
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
		return &Pool{n: 1, tails: make([][4]float32, 1)}
	}
	return p
}
