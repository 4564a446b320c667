//go:build cgo || (js && !cpuonly)

package wgsl

import (
	"fmt"

	"github.com/tessera-llm/tessera/core/config"
)

// Op wrappers of kda_chunk.wgsl and kda_chunk_inter.wgsl.

const (
	// kdaChunkMax is the largest chunk the kernels take (CMAX in
	// kda_chunk.wgsl: L is CMAX² words of workgroup memory).
	kdaChunkMax = 32
	// kdaChunkDKMax is the largest DK (DKMAX in kda_chunk_inter.wgsl: a
	// state column is private memory of the inter pass).
	kdaChunkDKMax = 128
	// kdaChunk is the chunk the runner uses (BENCHMARKS.md, "Chunked KDA
	// prefill").
	kdaChunk = 16
)

// kdaChunkRoundWords caps the scratch of one round of chunks (64 MiB, half
// a storage binding); longer pieces run in several rounds. Tests lower it.
var kdaChunkRoundWords = 1 << 24

// KDA prefill kernel choice: kdaAuto picks by shape (kdaUseChunked), the
// others force one kernel (tests).
const (
	kdaAuto = iota
	kdaForceChunked
	kdaForceRecurrent
)

var kdaPrefill = kdaAuto

// kdaUseChunked reports whether a piece of T tokens with heads of dk
// runs the chunked kernels. Measured on lavapipe (BENCHMARKS.md, "Chunked
// KDA prefill"; runs on a loaded machine) they beat the recurrent kernel
// for 8 heads of 64 and 32 heads of 128 (H·dv 512 and 4,096 did not
// change the winner) from 4 tokens up, so the rule is T ≥ 4 and
// dk ≤ kdaChunkDKMax; a decode step (one token) stays recurrent.
func kdaUseChunked(T, dk int) bool {
	if T < 2 || dk > kdaChunkDKMax || kdaPrefill == kdaForceRecurrent {
		return false
	}
	return kdaPrefill == kdaForceChunked || T >= 4
}

// KDA records the KDA recurrence of a's tokens with the kernel
// kdaUseChunked picks for its shape: KDAChunked with chunks of kdaChunk
// tokens, or KDARecurrent (always for one token).
func (d *Device) KDA(a *KDAArgs) error {
	if a != nil && kdaUseChunked(a.T, a.DK) {
		return d.KDAChunked(a, kdaChunk)
	}
	return d.KDARecurrent(a)
}

// kdaChunkScratch is the scratch KDAChunked uses for T tokens in chunks
// of C: one block per (chunk, head), at most kdaChunkRoundWords' worth
// and maxGroups chunks (the intra pass's grid), one chunk at least.
func kdaChunkScratch(T, H, dk, dv, C int) int {
	bs := newKDAChunkLayout(C, dk, dv).bs
	return max(1, min(kdaChunkRoundWords/(H*bs), (T+C-1)/C, maxGroups)) * H * bs
}

// kdaPrefillScratch is the scratch (words) a runner's prefill pieces of up
// to maxChunk tokens take in KDAChunked for c's delta-rule layers (KDA, or
// Gated DeltaNet with its value heads), 0 when they run the recurrent
// kernel or c has none.
func kdaPrefillScratch(c *config.Config, maxChunk int) int {
	H, dk, dv := c.KDAHeads, c.KDAHeadDim, c.KDAHeadDim
	if c.LinearValueHeads > 0 {
		H, dk, dv = c.LinearValueHeads, c.LinearKeyHeadDim, c.LinearValueHeadDim
	}
	if H <= 0 || !kdaUseChunked(maxChunk, dk) {
		return 0
	}
	return kdaChunkScratch(maxChunk, H, dk, dv, kdaChunk)
}

// kdaChunkLayout is the scratch block of one (chunk, head) in words: QE
// [C, DK] at 0, W [C, DK] at w, KD [C, DK] at kd, U [C, DV] at u, A [C, C]
// at a, EL [DK] at el; blocks are bs words apart, chunk-major.
type kdaChunkLayout struct{ bs, w, kd, u, a, el int }

func newKDAChunkLayout(C, dk, dv int) kdaChunkLayout {
	cd := C * dk
	l := kdaChunkLayout{w: cd, kd: 2 * cd, u: 3 * cd, a: 3*cd + C*dv}
	l.el = l.a + C*C
	l.bs = l.el + dk
	return l
}

// kdaChunkLoops is the most loop iterations one invocation of the two
// passes runs for one chunk of C tokens: intra's (decays, pairs of the
// lower triangle, forward substitution over DK+DV columns) and inter's
// per chunk (Vnew and O, intra-chunk O, state update; the state column's
// load and store, 2·DK, come once per dispatch).
func kdaChunkLoops(C, dk, dv int) (intra, inter int) {
	cols := func(n int) int { return (n + 63) / 64 }
	pairs := C * (C + 1) / 2
	intra = cols(dk)*C + cols(pairs)*dk + cols(dk)*C + cols(dk+dv)*(C*(C+1)/2)
	inter = C*dk + C*(C+1)/2 + dk*(C+1)
	return intra, inter
}

// KDAChunked records the same KDA recurrence as KDARecurrent (the same
// operands, S updated in place) in the chunked WY/UT form of
// ref.KDAChunked with chunks of C ≤ 32 tokens: kda_chunk.wgsl computes
// every chunk's intra-chunk terms at once (a workgroup per chunk and
// head), then kda_chunk_inter.wgsl carries the state across the chunks
// (an invocation per head and value column, as many chunks per dispatch
// as loopBudget allows). The intermediate terms live in the device's
// "kda" scratch buffer; a piece needing more than kdaChunkScratchWords
// runs in rounds of chunks.
func (d *Device) KDAChunked(a *KDAArgs, C int) error {
	if err := a.check("KDAChunked"); err != nil {
		return err
	}
	if C < 1 || C > kdaChunkMax {
		return fmt.Errorf("wgsl: KDAChunked: chunk of %d tokens (1…%d)", C, kdaChunkMax)
	}
	T, H, dk, dv := a.T, a.H, a.DK, a.DV
	if dk > kdaChunkDKMax {
		return fmt.Errorf("wgsl: KDAChunked: DK=%d above %d", dk, kdaChunkDKMax)
	}
	intraLoops, interLoops := kdaChunkLoops(C, dk, dv)
	if intraLoops > loopBudget || interLoops+2*dk > loopBudget {
		return fmt.Errorf("wgsl: KDAChunked: DK=%d DV=%d too large for chunks of %d", dk, dv, C)
	}
	l := newKDAChunkLayout(C, dk, dv)
	words := kdaChunkScratch(T, H, dk, dv, C)
	if words > maxBindingWords {
		return fmt.Errorf("wgsl: KDAChunked: %d heads of DK=%d DV=%d need more than one binding of scratch", H, dk, dv)
	}
	perRound := words / (H * l.bs) // chunks per round
	X, err := d.scratchBuf("kda", words)
	if err != nil {
		return err
	}
	kIntra, err := d.kernel("kda_chunk.wgsl", "intra", 6)
	if err != nil {
		return err
	}
	kInter, err := d.kernel("kda_chunk_inter.wgsl", "inter", 3)
	if err != nil {
		return err
	}
	perDispatch := (loopBudget - 2*dk) / interLoops
	intraBufs := []*Buffer{X, a.Q.Buf, a.K.Buf, a.V.Buf, a.G.Buf, a.Beta.Buf}
	interBufs := []*Buffer{X, a.O.Buf, a.S.Buf}
	for t0 := 0; t0 < T; t0 += perRound * C {
		n := min(perRound*C, T-t0) // tokens of this round
		nc := (n + C - 1) / C
		p := params{}.u(n, H, dk, dv, C, l.bs, l.w, l.kd, l.u, l.a, l.el, 0,
			a.Q.Off+t0*H*dk, a.K.Off+t0*H*dk, a.V.Off+t0*H*dv, a.G.Off+t0*H*dk, a.Beta.Off+t0*H,
			a.O.Off+t0*H*dv, a.S.Off)
		if err := d.dispatchXY(kIntra, p.u(0, nc), intraBufs, nc, H); err != nil {
			return err
		}
		for c0 := 0; c0 < nc; c0 += perDispatch {
			if err := d.dispatchXY(kInter, p.u(c0, min(nc, c0+perDispatch)), interBufs, (dv+63)/64, H); err != nil {
				return err
			}
		}
	}
	return nil
}
