// Package wgsl is tessera's GPU backend: WGSL compute kernels and the Go code
// that drives them through github.com/cogentcore/webgpu v0.23.0 (package
// wgpu), written once for native builds (wgpu-native via cgo; device from
// package native) and the browser (GOOS=js; wasm/gpu.go acquires the
// device from navigator.gpu and wraps it with wgpu.NewDevice and NewDevice).
// Every kernel mirrors a core/ref function and is conformance-tested
// against it (cases in package wgsl/conformance, run natively by
// conformance_test.go and in headless Chromium by cmd/tessera's
// TestBrowserE2E; support matrix in docs/support-matrix.md).
//
// # Design
//
//   - Buffers are created at load time (NewBuffer, UploadF32, UploadMat).
//     Ops take Views (buffer + word offset) and record dispatches into the
//     device's current step: one command encoder and one compute pass shared
//     by all ops until Flush, Sync or a Read submits it. Nothing is read back
//     unless asked, so a model can keep all activations on the GPU and submit
//     once per layer or token.
//   - Sizes and offsets go in a per-dispatch uniform block (never baked into
//     WGSL). Blocks live in one uniform arena bound with a dynamic offset, so
//     bind groups depend only on the storage buffers and are cached per
//     (pipeline, buffers); pipelines are cached per entry point. The arena
//     holds 2048 dispatches; a longer step is flushed automatically.
//   - Every storage binding is read_write and covers the whole buffer, and
//     no dispatch binds one buffer twice (WebGPU forbids overlapping
//     bindings when one is writable; Chromium enforces it, native wgpu
//     does not). Device.resolve gives unused operands (nil) a per-binding
//     placeholder buffer, and when an op's operands share a buffer (in
//     place, or two views of one buffer) it binds the buffer once and
//     uses a shader variant whose aliased variable is renamed to the
//     first binding's (aliasSource): same words, same results. Variants
//     and bind groups are cached per call site; TestNoAliasingBindings
//     traces every dispatch of the conformance suite and the runner.
//   - Weights: F32, or F16 / BF16 packed two per u32 (unpack2x16float,
//     shifts); all arithmetic is f32 — no shader-f16 exists in this stack.
//   - Grids larger than 65,535 workgroups are spread over x and y.
//   - Kernels are written for the WebGPU default limits (≤ 7 storage
//     buffers, ≤ 16 KiB workgroup memory, 256 invocations).
//
// # Whole model
//
// Runner (runner.go) runs a model on the GPU: the family's forward pass —
// the one definition the CPU runs too (core/model/k3.go over core/nn) —
// over the WebGPU backend (gpu.go: the basic ops and the fused
// capabilities, upload.go: weights as the family declares them, stacked
// where declared together). NewRunner uploads every weight once and
// allocates all activations, KDA states, conv tails, MLA
// latent caches (for RunnerOptions.MaxContext, paged across buffers of at
// most 128 MiB — LatentCache — so no binding limit caps the context; the
// attention kernels bind one page per dispatch) and attention scratch;
// Forward mirrors model.Runner.Forward (logits of the last token, or of all
// T tokens when the slice holds T·V); SampleNext picks the next token on
// the GPU — the argmax (Greedy), or a seeded draw with temperature, top-k,
// top-p and min-p (sample.wgsl, given generate.Sampler's uniform draws) —
// reading back one word per decoded token. A step is one command buffer;
// decoding creates no GPU object (TestRunnerMatchesCPU checks it) and
// Stats reports the dispatches of the last step. The live routing/state
// view (live.go, engine.LiveBackend) costs nothing until asked for: with
// SetRouteHook each MoE layer's routed ids are copied to a small buffer as
// the step is recorded (route_copy) and read back after it; KDANorms
// reduces every KDA state on the device (sumsq) and reads back a few
// partial sums per layer. Choices:
//
//   - MoE without readback: Route writes expert ids and weights to GPU
//     buffers; GLUGateUp (gate and up fused with the GLU activation) and
//     GLUDown (down projection, routing weight and the sum over the K slots
//     fused) read the ids per (token, slot); prefill pieces run the
//     experts grouped by expert (GLUGrouped). A decoded token's LatentMoE
//     block is four dispatches: one GEMV for every product of its input
//     (router logits, latent down-projection, the shared experts' gate and
//     up: declared together), RouteGateUp (each workgroup routes the token
//     itself and the first stores the ids and weights; software adapters,
//     where that costs more than a dispatch, run Route first), GLUDown, and
//     one GEMV over two input segments (LinearNormedGLU: the latent
//     up-projection with its norm and the shared experts' down projection
//     with their GLU inside, both adding into the residual).
//   - KDA prefill pieces of 4 tokens or more run the chunked WY/UT form
//     (ref.KDAChunked; kda_chunk.wgsl, kda_chunk_inter.wgsl; chunks of
//     16): a workgroup per (chunk, head) computes every chunk's decays,
//     L = β K Kᵀ and Aqk with decays, and U, W by forward substitution at
//     once, then an invocation per (head, value column) carries the state
//     across the chunks (Vnew = U − W S, O, S), with the column's state in
//     private memory. Decays enter as exp of cumulative log-decay
//     differences, all ≤ 0, never exp(−G). On lavapipe this beats the
//     recurrent kernel (which spends dv exponentials per state row and
//     token and rewrites the state in memory each token) for 8 heads of
//     64 and 32 heads of 128 (BENCHMARKS.md; kdaUseChunked holds the
//     rule). 2–3-token pieces run the recurrent kernel (one dispatch per
//     ≤ loopBudget/(2·dk+2) tokens). A decode step runs KDAStep
//     (kda_step.wgsl): the conv with its tails, L2 norms, σ(β), the gate
//     f_b·f_a and the delta rule in one dispatch of one workgroup per head
//     (threads loop over the head's value columns), so each conv tail is
//     read and rewritten by one workgroup and no state changes layout
//     (snapshots and the CPU backend see the same tails);
//     on lavapipe it beat KDAPrep + the recurrent kernel at 4 × 64, 8 × 64
//     and 32 × 128 (BenchmarkKDAStep). The state pass has
//     H·dv invocations, as the recurrent kernel has (the intra pass
//     chunks·H workgroups), which still limits prefill on large GPUs.
//   - The Block AttnRes sources of a token are slots [t][nslots][d] of one
//     buffer (the family allocates them so), the running partial sum in
//     slot nb, so closing a block is free and one AttnRes dispatch reads
//     all sources. On a GPU a decoded token's read is not a dispatch of its
//     own: DeferAttnResNorm holds it back and the GEMV that reads it next
//     (the block's stacked projections) computes it in every workgroup's
//     prologue (linear.wgsl's gemv_res), the first workgroup also storing
//     it; any other dispatch, flush or read records it first. Software
//     adapters keep the separate dispatch, which measured faster there
//     (Device.SetRepeatFusions).
//   - Matrix-vector kernels compute 8 rows per workgroup on a GPU (8
//     threads per row, summed in workgroup memory) and 64 on a software
//     adapter (one thread per row, no barrier): the workgroup count and
//     its barriers are what CPU Vulkan drivers pay for
//     (Device.SetGEMVLanes).
//   - A weight matrix larger than one storage binding (128 MiB, the
//     WebGPU default) is uploaded as row-range parts, one buffer each
//     (Mat.Parts); Linear runs a dispatch per part into its rows of the
//     output and Embed gathers part by part, so an lm_head or embedding
//     table of any size works on every device (TestRunnerSplitWeights,
//     TestConformanceSplitMatrices). Expert stacks and the other kernels'
//     matrices must fit one binding and say so when they do not.
//
// # Workarounds for v0.23.0 (see docs/webgpu.md in the shared docs)
//
//   - In the browser, Queue.WriteBuffer views the wasm memory's ArrayBuffer
//     and then calls into JavaScript; a heap growth in between detaches
//     the view ("Cannot perform Construct on a detached ArrayBuffer",
//     seen mid-decode). Device.writeQueue copies through a staging
//     Uint8Array the device keeps instead (submit_js.go).
//   - Bug 3 (cgo handle freed by a GC between MapAsync and its callback):
//     Device.read is the only place that maps a buffer. It waits for the
//     submission first, then under one package mutex turns GC off
//     (debug.SetGCPercent(-1)) only until the map callback has fired.
//     Code using this package must call GC instead of runtime.GC and must not
//     set GOMEMLIMIT. TestReadbackUnderGCPressure guards it.
//   - Bug 5 (Poll(true) returns after 5 s while work still runs, and
//     wgpu-core then frees what the GPU still uses): keep each submission
//     far below 5 s (tests: < 1 s on lavapipe); wait polls with Poll(false)
//     instead of blocking while a long-context runner (≥ 128 K tokens,
//     whose decode step takes seconds on a CPU driver) holds the device and
//     after bulk transfers (a model upload), and falls back to polling when
//     Poll(true) took ≥ 4 s.
//   - lavapipe stops any invocation after ~65,535 loop iterations, silently:
//     wrappers split work (MLA keys in splits/tiles of 128, KDA and conv
//     tokens per dispatch) so no invocation loops more than loopBudget.
//   - Bugs 1, 2, 4: native.Open uses CreateInstance(nil), RequestDevice(nil)
//     and never sets the device-lost callback.
//   - Bug 6: every object is released (Buffer.Release, Device.Close).
//   - Bugs 10, 11: explicit bind-group and pipeline layouts; explicit 1s in
//     DispatchWorkgroups. Bug 12: zero-length writes are skipped.
//   - Build split: files importing wgpu are tagged cgo || (js && !cpuonly);
//     stub.go (the rest) keeps CGO_ENABLED=0 builds and the browser's
//     CPU-only bundle (-tags cpuonly) compiling with Available false, so
//     that bundle links neither wgpu nor the log/slog its js code pulls in.
//   - Readback in the browser (submit_js.go) maps the staging buffer with
//     its own promise callbacks: the binding's Buffer.MapAsync reports
//     success when the promise rejects (a lost device).
//
// A Device is not safe for concurrent use.
package wgsl
