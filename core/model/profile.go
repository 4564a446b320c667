package model

import (
	"time"

	"github.com/tessera-llm/tessera/core/config"
)

// Op is a category of work in the forward pass, for Profile.
type Op int

// The op categories a Profile accounts for.
const (
	OpKDA     Op = iota // KDA mixers (projections, conv, gate, delta rule, output)
	OpMLA               // MLA mixers (projections, cache append, attention, output)
	OpMoE               // MoE blocks (router, experts, shared experts, latent projections)
	OpMLP               // dense FFN blocks
	OpAttnRes           // Block Attention Residual reads
	OpLMHead            // final norm and lm_head
	OpOther             // embedding, norms, residual adds
	NumOps
)

var opNames = [NumOps]string{"KDA", "MLA", "MoE", "dense MLP", "AttnRes", "lm_head", "other"}

// String names the op category.
func (o Op) String() string { return opNames[o] }

// Profile accumulates wall time per op category across Forward calls when
// set on a Runner (Runner.Profile). Timing costs two clock reads per op;
// leave it nil when not measuring.
type Profile struct {
	Dur   [NumOps]time.Duration
	Calls int // Forward calls
	Total time.Duration
}

// Reset zeroes the profile.
func (p *Profile) Reset() { *p = Profile{} }

func mixerOp(k config.LayerKind) Op {
	if k == config.MLA {
		return OpMLA
	}
	return OpKDA
}

// tick returns the current time when profiling, else the zero time.
func (r *Runner) tick() time.Time {
	if r.Profile == nil {
		return time.Time{}
	}
	return time.Now()
}

// tock adds the time since t0 to op.
func (r *Runner) tock(op Op, t0 time.Time) {
	if r.Profile != nil {
		r.Profile.Dur[op] += time.Since(t0)
	}
}

func ffnOp(l *Layer) Op {
	if l.MoE != nil {
		return OpMoE
	}
	return OpMLP
}
