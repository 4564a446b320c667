package ref

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tessera-llm/tessera/core/tensor"
)

// randMat is a rows×cols matrix of type dt with normal entries, and its
// float32 values.
func randMat(r *rand.Rand, rows, cols int, dt tensor.DType) (*tensor.Mat, []float32) {
	switch dt {
	case tensor.F32:
		f := randVec(r, rows*cols, 1)
		return tensor.NewF32(rows, cols, f), f
	case tensor.Q8:
		W := tensor.Quantize(tensor.NewF32(rows, cols, randVec(r, rows*cols, 1)))
		return W, W.Float32()
	}
	W := tensor.NewHalf(rows, cols, dt, halfBits(r, rows*cols, dt))
	return W, W.Float32()
}

// TestRowsDotMatchesGeneric checks the GEMV kernels (four rows at a time on
// AVX-512, one at a time otherwise) against float64 sums for every dtype,
// every inner length 0..100 (all remainders of the 32- and 16-wide loops)
// and row counts around the four-row tile, and that a row's bits do not
// depend on how [lo, hi) is cut.
func TestRowsDotMatchesGeneric(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16, tensor.Q8} {
		for in := 0; in <= 100; in++ {
			rows := 1 + r.IntN(9)
			W, wf := randMat(r, rows, in, dt)
			x := randVec(r, in, 1)
			buf := make([]float32, in)
			all := make([]float32, rows)
			rowsDot(W, 0, rows, x, all, buf)
			for o := range rows {
				wr := wf[o*in : (o+1)*in]
				var s float64
				for i := range wr {
					s += float64(wr[i]) * float64(x[i])
				}
				tol := dotTol(wr, x)
				if dt == tensor.Q8 {
					tol += 1e-6 * float64(in) // the scale is applied after the sum
				}
				require.InDelta(t, s, all[o], tol, "%v in=%d rows=%d o=%d", dt, in, rows, o)
			}
			for lo := 0; lo < rows; lo++ {
				for hi := lo + 1; hi <= rows; hi++ {
					part := make([]float32, hi-lo)
					rowsDot(W, lo, hi, x, part, buf)
					require.Equal(t, all[lo:hi], part, "%v in=%d split [%d,%d)", dt, in, lo, hi)
				}
			}
		}
	}
}

// TestPoolRunsEverySpanOnce runs many For calls of every size on pools of
// 1..4 workers, with pauses long enough for the workers to park, and
// checks each index ran exactly once.
func TestPoolRunsEverySpanOnce(t *testing.T) {
	for _, workers := range []int{1, 2, 3, 4} {
		t.Run(fmt.Sprint(workers), func(t *testing.T) {
			p := NewPool(workers)
			defer p.Close()
			for round := range 300 {
				n := round % 37
				var hits [37]atomic.Int32
				p.For(n, 1+round%5, countJob{&hits})
				for i := range n {
					require.EqualValues(t, 1, hits[i].Load(), "round %d n=%d index %d", round, n, i)
				}
				if round%100 == 99 {
					var wg sync.WaitGroup
					wg.Add(1)
					go func() { defer wg.Done(); spinFor(3 * spinWait) }()
					wg.Wait()
				}
			}
		})
	}
}

type countJob struct{ hits *[37]atomic.Int32 }

func (j countJob) Run(_, lo, hi int) {
	for i := lo; i < hi; i++ {
		j.hits[i].Add(1)
	}
}

// spinFor sleeps for d (long enough for idle workers to park).
func spinFor(d time.Duration) { time.Sleep(d) }

// TestLinearTokensMatchDecode: with the AVX-512 kernels, every token of a
// prefill (4×6 tiles, leftover tokens and rows, half weights widened in
// registers or into scratch) gets the bits a one-token Linear gives it, so
// prefilled and decoded states agree exactly.
func TestLinearTokensMatchDecode(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	p := NewPool(2)
	defer p.Close()
	compared := 0
	for _, dt := range []tensor.DType{tensor.F32, tensor.F16, tensor.BF16} {
		for _, T := range []int{2, 5, 6, 7, 13, 16, 23} {
			for _, in := range []int{16, 17, 47, 64, 100} {
				for _, outN := range []int{1, 3, 4, 9, 14} {
					W, _ := randMat(r, outN, in, dt)
					if !useTiles(W) {
						continue // AVX2 / portable kernels: tiles and dots round differently
					}
					x := randVec(r, T*in, 1)
					got := make([]float32, T*outN)
					Linear(p, got, x, T, W)
					one := make([]float32, outN)
					for tt := range T {
						Linear(p, one, x[tt*in:(tt+1)*in], 1, W)
						require.Equal(t, one, got[tt*outN:(tt+1)*outN], "%v T=%d in=%d out=%d token %d", dt, T, in, outN, tt)
					}
					compared++
				}
			}
		}
	}
	if useAVX512 {
		require.Positive(t, compared, "AVX-512 present but no case ran the tiles")
	} else {
		t.Log("no AVX-512 here: only the tolerance tests (TestLinearTiles) cover Linear")
	}
}

// TestPoolBacksOffSpinning: a window of regions whose waits outlast the
// spin turns spinning off; it comes back after one window, then after
// twice as many when the retry fails too, and stays while it pays.
func TestPoolBacksOffSpinning(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	window := func(missed bool) {
		for range spinWindow {
			p.judgeSpin(missed)
		}
	}
	require.Positive(t, p.spin.Load())
	window(false)
	require.Positive(t, p.spin.Load(), "spinning that pays stays on")
	window(true)
	require.Zero(t, p.spin.Load(), "a window of missed spins turns spinning off")
	window(false)
	require.Positive(t, p.spin.Load(), "retried after one window")
	window(true)
	require.Zero(t, p.spin.Load())
	window(false)
	require.Zero(t, p.spin.Load(), "the second retry waits two windows")
	window(false)
	require.Positive(t, p.spin.Load())
	window(false)
	window(true)
	window(false)
	require.Positive(t, p.spin.Load(), "a retry that paid resets the back-off")
	var hits [37]atomic.Int32
	p.For(37, 1, countJob{&hits}) // a pool that does not spin still runs every span
	for i := range 37 {
		require.EqualValues(t, 1, hits[i].Load())
	}
}

// TestPoolCallerTakesLateWorkersChunks: the caller claims the chunks a
// worker does not get to, so a worker that stalls in a chunk holds the
// region up by that chunk only, never by a fixed share: with worker 1
// stalling 50 ms per chunk and worker 0 taking 1 ms, worker 0 runs most
// chunks (a fixed split would give it half; the margin allows the caller
// to lose its core for a while on a busy machine), and every index runs
// once.
func TestPoolCallerTakesLateWorkersChunks(t *testing.T) {
	p := NewPool(2)
	defer p.Close()
	stalled := 0
	for round := range 6 {
		j := &stallJob{}
		p.For(64, 1, j)
		for i := range 64 {
			require.EqualValues(t, 1, j.hits[i].Load(), "round %d index %d", round, i)
		}
		chunks := 2 * chunksPerWorker
		require.Greater(t, int(j.byWorker[0].Load()), chunks/2, "round %d: worker 0 ran %d of %d chunks", round, j.byWorker[0].Load(), chunks)
		stalled += int(j.byWorker[1].Load())
	}
	t.Logf("worker 1 stalled in %d of 6 regions", stalled)
}

// stallJob counts each index and each worker's chunks; worker 1 sleeps
// 50 ms in every chunk it runs, worker 0 1 ms (so worker 1 wakes while
// chunks are left).
type stallJob struct {
	hits     [64]atomic.Int32
	byWorker [2]atomic.Int32
}

func (j *stallJob) Run(w, lo, hi int) {
	j.byWorker[w].Add(1)
	time.Sleep(time.Duration(1+49*w) * time.Millisecond)
	for i := lo; i < hi; i++ {
		j.hits[i].Add(1)
	}
}
