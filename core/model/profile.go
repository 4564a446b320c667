package model

import (
	"time"

	"github.com/tessera-llm/tessera/core/nn"
)

// Op is a category of work in the forward pass, for Profile.
type Op = nn.Op

// The op categories a Profile accounts for.
const (
	OpKDA     = nn.OpKDA
	OpMLA     = nn.OpMLA
	OpGDN     = nn.OpGDN
	OpAttn    = nn.OpAttn
	OpMoE     = nn.OpMoE
	OpMLP     = nn.OpMLP
	OpAttnRes = nn.OpAttnRes
	OpLMHead  = nn.OpLMHead
	OpOther   = nn.OpOther
	NumOps    = nn.NumOps
)

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
