package nn

import (
	"time"

	"github.com/tessera-llm/tessera/core/ref"
	"github.com/tessera-llm/tessera/core/tensor"
)

// Fused capabilities. Each is an interface a backend may implement; its
// method returns false to decline a call (a shape or layout its kernel does
// not take), and the package function of the same name then runs the
// unfused math, written below with basic ops. The doc comment of each
// function is that math.

// Product is one matrix product out = W·x of LinearBatch.
type Product struct {
	Out, X Tensor
	W      *tensor.Mat
}

// LinearBatcher computes several products in one go (one parallel region
// on the CPU, one GEMV over weights stacked at upload on the GPU: see
// Uploader.Mats). It may replace ps[i].Out by a view of its own memory
// holding the result.
type LinearBatcher interface {
	LinearBatch(T int, ps []Product) bool
}

// Linears: ps[i].Out = ps[i].W · ps[i].X for every product whose W is not
// nil. Afterwards ps[i].Out is where the result is (a backend may have put
// it elsewhere: read the results from ps).
func Linears(b Backend, T int, ps []Product) {
	if f, ok := b.(LinearBatcher); ok && f.LinearBatch(T, ps) {
		return
	}
	for _, p := range ps {
		if p.W != nil {
			b.Linear(p.Out, p.X, T, p.W)
		}
	}
}

// LinearAccumer adds a product into its output in the same kernel.
type LinearAccumer interface {
	LinearAccum(out, x Tensor, T int, W *tensor.Mat) bool
}

// Project: out = W·x, or out += W·x when accum (then via tmp, a scratch of
// out's shape, if the backend has no LinearAccum).
func Project(b Backend, out, x Tensor, T int, W *tensor.Mat, accum bool, tmp Tensor) {
	if !accum {
		b.Linear(out, x, T, W)
		return
	}
	if f, ok := b.(LinearAccumer); ok && f.LinearAccum(out, x, T, W) {
		return
	}
	b.Linear(tmp, x, T, W)
	b.Add(out, tmp, T)
}

// ConvArgs are the operands of KDAPrep: the projections Q, K, V [T, H·dk]
// and Beta [T, H], the outputs QC, KC, VC, the depthwise conv weights
// and tails of each, and optionally the step's gate.
type ConvArgs struct {
	T, H, DK, Kernel    int
	QScale, Eps         float32
	Q, K, V, Beta       Tensor
	QC, KC, VC          Tensor
	WQ, WK, WV          []float32
	TailQ, TailK, TailV Tensor
	// Gate, if not nil, is the KDA gate KDAPrep also computes (its
	// inputs are independent of the conv's): LinearKDAGate's operands.
	Gate *GateProj
}

// GateProj are LinearKDAGate's operands: G = KDAGate(W·X).
type GateProj struct {
	G, X Tensor
	W    *tensor.Mat
	Args KDAGateArgs
}

// KDAPrepper runs KDAPrep in one kernel.
type KDAPrepper interface {
	KDAPrep(a *ConvArgs) bool
}

// KDAPrep is the KDA input preparation (architecture.md §1.6):
//
//	qc = L2Norm(ShortConv(q)) · dk^−½,  kc = L2Norm(ShortConv(k)),
//	vc = ShortConv(v),                   β = σ(β)
//
// with the L2 norms per head of dk values, and with a.Gate the gate
// g = KDAGate(f_b · f_a) (LinearKDAGate).
func KDAPrep(b Backend, a *ConvArgs) {
	if f, ok := b.(KDAPrepper); ok && f.KDAPrep(a) {
		return
	}
	b.ShortConv(a.QC, a.Q, a.T, a.WQ, a.TailQ, a.Kernel)
	b.ShortConv(a.KC, a.K, a.T, a.WK, a.TailK, a.Kernel)
	b.ShortConv(a.VC, a.V, a.T, a.WV, a.TailV, a.Kernel)
	b.L2Norm(a.QC, a.T, a.DK, a.Eps, a.QScale)
	b.L2Norm(a.KC, a.T, a.DK, a.Eps, 1)
	b.Sigmoid(a.Beta, a.T)
	if g := a.Gate; g != nil {
		LinearKDAGate(b, g.G, g.X, a.T, g.W, g.Args)
	}
}

// KDAStepper runs KDAStep in one kernel; it declines pieces of T > 1.
type KDAStepper interface {
	KDAStep(c *ConvArgs, d *DeltaArgs) bool
}

// KDAStep is a KDA mixer's core: KDAPrep(c), then DeltaRule(d) over its
// outputs (d's Q, K, V, G, Beta are c's QC, KC, VC, Gate.G, Beta):
//
//	qc, kc, vc, β, g = KDAPrep(q, k, v, β, f_a)
//	o = DeltaRule(qc, kc, vc, g, β; S)
//
// The outputs are o, the state S and the conv tails; a backend that fuses
// the two may leave c's outputs (QC, KC, VC, the gate, β) unwritten.
func KDAStep(b Backend, c *ConvArgs, d *DeltaArgs) {
	if f, ok := b.(KDAStepper); ok && f.KDAStep(c, d) {
		return
	}
	KDAPrep(b, c)
	b.DeltaRule(d)
}

// LinearKDAGater computes the KDA gate as the epilogue of its projection.
type LinearKDAGater interface {
	LinearKDAGate(g, x Tensor, T int, W *tensor.Mat, a KDAGateArgs) bool
}

// LinearKDAGate: g = KDAGate(W·x) (W is f_b_proj, x = f_a_proj(x)).
func LinearKDAGate(b Backend, g, x Tensor, T int, W *tensor.Mat, a KDAGateArgs) {
	if f, ok := b.(LinearKDAGater); ok && f.LinearKDAGate(g, x, T, W, a) {
		return
	}
	b.Linear(g, x, T, W)
	b.KDAGate(g, T, a)
}

// LinearGatedNormer computes the gated norm inside the output projection.
type LinearGatedNormer interface {
	LinearGatedNorm(out Tensor, accum bool, x, g Tensor, T int, W *tensor.Mat, nu []float32, eps float32, act ref.GateAct) bool
}

// LinearGatedNorm: out (+)= W · (RMSNorm(x; nu) ⊙ act(g)), the norm per
// group of len(nu) values. The fallback normalises x in place.
func LinearGatedNorm(b Backend, out Tensor, accum bool, x, g Tensor, T int, W *tensor.Mat, nu []float32, eps float32, act ref.GateAct, tmp Tensor) {
	if f, ok := b.(LinearGatedNormer); ok && f.LinearGatedNorm(out, accum, x, g, T, W, nu, eps, act) {
		return
	}
	b.RMSNormGated(x, x, g, T, nu, eps, act)
	Project(b, out, x, T, W, accum, tmp)
}

// LinearNormer computes a normed input's projection in one kernel.
type LinearNormer interface {
	LinearNormed(out Tensor, accum bool, x Tensor, T int, W *tensor.Mat, nu []float32, eps float32) bool
}

// LinearNormed: out (+)= W · RMSNorm(x; nu). The fallback normalises x in
// place.
func LinearNormed(b Backend, out Tensor, accum bool, x Tensor, T int, W *tensor.Mat, nu []float32, eps float32, tmp Tensor) {
	if f, ok := b.(LinearNormer); ok && f.LinearNormed(out, accum, x, T, W, nu, eps) {
		return
	}
	b.RMSNorm(x, x, T, nu, eps)
	Project(b, out, x, T, W, accum, tmp)
}

// LinearGater computes a sigmoid-gated input's projection in one kernel.
type LinearGater interface {
	LinearGated(out Tensor, accum bool, x, g Tensor, T int, W *tensor.Mat) bool
}

// LinearGated: out (+)= W · (x ⊙ σ(g)). The fallback gates x in place.
func LinearGated(b Backend, out Tensor, accum bool, x, g Tensor, T int, W *tensor.Mat, tmp Tensor) {
	if f, ok := b.(LinearGater); ok && f.LinearGated(out, accum, x, g, T, W) {
		return
	}
	b.SigmoidGate(x, g, T)
	Project(b, out, x, T, W, accum, tmp)
}

// LatentAppender appends a step's latent rows with their c_kv normed and
// attends over the cache in one go (on the GPU the append is part of the
// attention's first kernel).
type LatentAppender interface {
	AppendAttend(a *LatentArgs, rows Tensor, norm []float32, eps float32) bool
}

// AppendAttend appends the step's latent rows [T, r_kv+dr] ([c_kv; k_r],
// c_kv not yet normed) to a.Cache and attends over it:
//
//	c_kv = RMSNorm(c_kv; norm);  Append(a.Cache, rows);  LatentAttention(a)
//
// The fallback normalises rows' c_kv in place.
func AppendAttend(b Backend, a *LatentArgs, rows Tensor, norm []float32, eps float32) {
	if f, ok := b.(LatentAppender); ok && f.AppendAttend(a, rows, norm, eps) {
		return
	}
	ckv := b.Cols(rows, 0, a.RKV)
	b.RMSNorm(ckv, ckv, a.T, norm, eps)
	b.Append(a.Cache, rows, a.T)
	b.LatentAttention(a)
}

// LinearGLUer computes a GLU's activation inside its down projection.
type LinearGLUer interface {
	LinearGLU(out Tensor, accum bool, gate, up Tensor, T int, W *tensor.Mat, act ref.Act) bool
}

// LinearGLU: out (+)= W · act(gate, up) (ref.Act.GLU: SiLU(gate) ⊙ up, or
// SiTU's). The fallback activates gate in place.
func LinearGLU(b Backend, out Tensor, accum bool, gate, up Tensor, T int, W *tensor.Mat, act ref.Act, tmp Tensor) {
	if f, ok := b.(LinearGLUer); ok && f.LinearGLU(out, accum, gate, up, T, W, act) {
		return
	}
	b.GLUAct(gate, up, T, act)
	Project(b, out, gate, T, W, accum, tmp)
}

// LinearNormedGLUer computes two projections of different inputs that add
// into one output in one kernel.
type LinearNormedGLUer interface {
	LinearNormedGLU(out Tensor, accum bool, x Tensor, T int, W *tensor.Mat, nu []float32, eps float32, gate, up Tensor, W2 *tensor.Mat, act ref.Act) bool
}

// LinearNormedGLU: out (+)= W · RMSNorm(x; nu) + W2 · act(gate, up) —
// LinearNormed, then LinearGLU adding into out.
func LinearNormedGLU(b Backend, out Tensor, accum bool, x Tensor, T int, W *tensor.Mat, nu []float32, eps float32, gate, up Tensor, W2 *tensor.Mat, act ref.Act, tmp Tensor) {
	if f, ok := b.(LinearNormedGLUer); ok && f.LinearNormedGLU(out, accum, x, T, W, nu, eps, gate, up, W2, act) {
		return
	}
	LinearNormed(b, out, accum, x, T, W, nu, eps, tmp)
	LinearGLU(b, out, true, gate, up, T, W2, act, tmp)
}

// AttnResNormer computes an AttnRes read and the norm after it in one
// kernel.
type AttnResNormer interface {
	AttnResNorm(out Tensor, srcs []Tensor, T int, w, gamma []float32, eps float32, norm []float32, normEps float32) bool
}

// AttnResNorm: out = RMSNorm(AttnRes(srcs; w, γ); norm) (architecture.md
// §4.3), via tmp.
func AttnResNorm(b Backend, out Tensor, srcs []Tensor, T int, w, gamma []float32, eps float32, norm []float32, normEps float32, tmp Tensor) {
	if f, ok := b.(AttnResNormer); ok && f.AttnResNorm(out, srcs, T, w, gamma, eps, norm, normEps) {
		return
	}
	b.AttnRes(tmp, srcs, T, w, gamma, eps)
	b.RMSNorm(out, tmp, T, norm, normEps)
}

// MoEArgs are the parameters of an MoE block.
type MoEArgs struct {
	Layer  int // for route hooks
	Router ref.Router
	Act    ref.Act
	Eps    float32
	S      *MoEScratch
}

// MoEScratch is the scratch of the unfused MoE: router logits [T, E], the
// experts' input z and combined output acc [T, ℓ], the shared experts'
// gate and up projections [T, I_shared], tmp [T, d], routing.
type MoEScratch struct {
	Logits, Z, Acc, Tmp  Tensor
	SharedGate, SharedUp Tensor
	Rt                   Routing
	ps                   [4]Product
}

// NewMoEScratch allocates MoEScratch for pieces of maxT tokens, E experts
// of input width w, top-K routing and shared experts of intermediate size
// shared (0: none); tmp is a [maxT, d] scratch the caller shares (the
// fallbacks' projection outputs).
func NewMoEScratch(b Backend, maxT, E, w, K, shared int, tmp Tensor) *MoEScratch {
	s := &MoEScratch{Logits: b.Alloc(maxT, E), Z: b.Alloc(maxT, w), Acc: b.Alloc(maxT, w), Tmp: tmp,
		Rt: Routing{Idx: b.Alloc(maxT, K), Wts: b.Alloc(maxT, K), K: K}}
	if shared > 0 {
		s.SharedGate, s.SharedUp = b.Alloc(maxT, shared), b.Alloc(maxT, shared)
	}
	return s
}

// RoutedExperter routes tokens and runs their experts in one go.
type RoutedExperter interface {
	RoutedExperts(out, x Tensor, T int, experts []GLU, logits Tensor, bias []float32, r ref.Router, rt Routing, act ref.Act, accum bool) bool
}

// RoutedExperts: Route then Experts —
//
//	(rt.Idx, rt.Wts) = Route(logits; bias, r)
//	out (+)= Σ_k rt.Wts[k] · GLU_{rt.Idx[k]}(x)
//
// the routing left in rt either way (route hooks, the live view).
func RoutedExperts(b Backend, out, x Tensor, T int, experts []GLU, logits Tensor, bias []float32, r ref.Router, rt Routing, act ref.Act, accum bool) {
	if f, ok := b.(RoutedExperter); ok && f.RoutedExperts(out, x, T, experts, logits, bias, r, rt, act, accum) {
		return
	}
	b.Route(rt, logits, T, bias, r)
	b.Experts(out, x, T, experts, rt, act, accum)
}

// MoEer runs a whole MoE block (its own grouping and batching).
type MoEer interface {
	MoE(out, x Tensor, T int, w *MoE, a *MoEArgs, accum bool) bool
}

// MoEBlock: out = MoE(x), or out += MoE(x) when accum (architecture.md
// §3.2–3.3):
//
//	logits = Gate·x;  (e, w) = Route(logits + bias)
//	z = RoutedExpertDownProj·x            (LatentMoE; else z = x)
//	y = Σ_k w_k · GLU_{e_k}(z)
//	y = RoutedExpertUpProj·RMSNorm(y)     (LatentMoE; the norm if present)
//	out (+)= y + GLU_shared(x)
//
// Every product of x — the router's, the latent down-projection, the
// shared experts' gate and up — is one Linears (x read once: one stacked
// GEMV on the GPU), the shared experts' activation inside their down
// projection (LinearGLU), which joins the latent up-projection when both
// add into out (LinearNormedGLU).
func MoEBlock(b Backend, out, x Tensor, T int, w *MoE, a *MoEArgs, accum bool) {
	if f, ok := b.(MoEer); ok && f.MoE(out, x, T, w, a, accum) {
		return
	}
	s, sh := a.S, w.SharedExperts
	ps := &s.ps
	*ps = [4]Product{{Out: s.Logits, X: x, W: w.Gate}, {Out: s.Z, X: x, W: w.RoutedExpertDownProj}}
	if sh != nil {
		ps[2], ps[3] = Product{Out: s.SharedGate, X: x, W: sh.GateProj}, Product{Out: s.SharedUp, X: x, W: sh.UpProj}
	}
	Linears(b, T, ps[:])
	logits, z := ps[0].Out, ps[1].Out
	if w.RoutedExpertDownProj == nil {
		z = x
	}
	switch {
	case w.RoutedExpertUpProj == nil:
		RoutedExperts(b, out, z, T, w.Experts, logits, w.EScoreCorrectionBias, a.Router, s.Rt, a.Act, accum)
	case w.RoutedExpertNorm != nil && accum:
		RoutedExperts(b, s.Acc, z, T, w.Experts, logits, w.EScoreCorrectionBias, a.Router, s.Rt, a.Act, false)
		if sh != nil {
			LinearNormedGLU(b, out, true, s.Acc, T, w.RoutedExpertUpProj, w.RoutedExpertNorm, a.Eps, ps[2].Out, ps[3].Out, sh.DownProj, a.Act, s.Tmp)
			return
		}
		LinearNormed(b, out, true, s.Acc, T, w.RoutedExpertUpProj, w.RoutedExpertNorm, a.Eps, s.Tmp)
	default:
		RoutedExperts(b, s.Acc, z, T, w.Experts, logits, w.EScoreCorrectionBias, a.Router, s.Rt, a.Act, false)
		if w.RoutedExpertNorm != nil {
			b.RMSNorm(s.Acc, s.Acc, T, w.RoutedExpertNorm, a.Eps)
		}
		Project(b, out, s.Acc, T, w.RoutedExpertUpProj, accum, s.Tmp)
	}
	if sh != nil {
		LinearGLU(b, out, true, ps[2].Out, ps[3].Out, T, sh.DownProj, a.Act, s.Tmp)
	}
}

// LayerEnder is told when a layer's ops are all issued (the GPU submits a
// multi-token piece layer by layer).
type LayerEnder interface {
	EndLayer(T int)
}

// EndLayer marks the end of a layer's ops.
func EndLayer(b Backend, T int) {
	if f, ok := b.(LayerEnder); ok {
		f.EndLayer(T)
	}
}

// Tracer receives named activations (tests, eval): "layer_in",
// "mixer_out", "ffn_in", "ffn_out" per layer, "final_hidden" (layer −1).
type Tracer interface {
	// Tracing reports whether a trace hook is set: then a family
	// materialises every traced activation instead of adding block
	// outputs into the residual stream inside their projections.
	Tracing() bool
	Trace(name string, layer int, t Tensor, T int)
}

// Tracing reports whether b traces activations.
func Tracing(b Backend) bool {
	f, ok := b.(Tracer)
	return ok && f.Tracing()
}

// Trace hands t to the backend's tracer, if any.
func Trace(b Backend, name string, layer int, t Tensor, T int) {
	if f, ok := b.(Tracer); ok && f.Tracing() {
		f.Trace(name, layer, t, T)
	}
}

// Op is a category of work in the forward pass, for profiles.
type Op int

// The op categories a profile accounts for.
const (
	OpKDA     Op = iota // KDA mixers (projections, conv, gate, delta rule, output)
	OpMLA               // MLA mixers (projections, cache append, attention, output)
	OpGDN               // Gated DeltaNet mixers (Qwen3-Next)
	OpAttn              // grouped-query attention mixers (Qwen3-Next)
	OpMoE               // MoE blocks (router, experts, shared experts, latent projections)
	OpMLP               // dense FFN blocks
	OpAttnRes           // Block Attention Residual reads
	OpLMHead            // final norm and lm_head
	OpOther             // embedding, norms, residual adds
	NumOps
)

var opNames = [NumOps]string{"KDA", "MLA", "GDN", "attention", "MoE", "dense MLP", "AttnRes", "lm_head", "other"}

// String names the op category.
func (o Op) String() string { return opNames[o] }

// Profiler accounts wall time per op category.
type Profiler interface {
	Profiling() bool
	Account(op Op, d time.Duration)
}

// Tick starts timing for Tock (the zero time when b does not profile).
func Tick(b Backend) time.Time {
	if f, ok := b.(Profiler); ok && f.Profiling() {
		return time.Now()
	}
	return time.Time{}
}

// Tock accounts the time since t0 (from Tick) to op.
func Tock(b Backend, op Op, t0 time.Time) {
	if t0.IsZero() {
		return
	}
	if f, ok := b.(Profiler); ok {
		f.Account(op, time.Since(t0))
	}
}
