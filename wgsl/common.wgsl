// Helpers shared by the kernels. The loader (prelude in device.go)
// prepends to a kernel file each function below that the file (or a
// helper it includes) calls, so every helper is written once. Blocks are
// separated by blank lines; each holds one function and its comment.

// tanh without overflow for large |x| (exp(2x) would give inf/inf).
fn tanh_s(x: f32) -> f32 {
  let e = exp(-2.0 * abs(x));
  return sign(x) * (1.0 - e) / (1.0 + e);
}

// glu_act is a GLU's activation of its gate and up values (ref.Act):
// act 0: SiLU(g)·u; act 1: SiTU, β·tanh(g/β)·σ(g) times u capped as
// β_lin·tanh(u/β_lin) (β_lin = 0: u uncapped).
fn glu_act(g: f32, u0: f32, act: u32, beta: f32, beta_lin: f32) -> f32 {
  if (act == 0u) {
    return g / (1.0 + exp(-g)) * u0;
  }
  var u = u0;
  if (beta_lin != 0.0) { u = beta_lin * tanh_s(u / beta_lin); }
  return beta * tanh_s(g / beta) / (1.0 + exp(-g)) * u;
}

// wpair is the weights of columns 2j and 2j+1 of the row at word base of
// the including kernel's weight matrix W (0 past the end): f32 (p.dtype
// 0: one word each), f16 (1) or bf16 (2: two per word); p.cols columns.
fn wpair(base: u32, j: u32) -> vec2<f32> {
  if (p.dtype == 0u) {
    let c = 2u * j;
    var r = vec2<f32>(bitcast<f32>(W[base + c]), 0.0);
    if (c + 1u < p.cols) { r.y = bitcast<f32>(W[base + c + 1u]); }
    return r;
  }
  let w = W[base + j];
  if (p.dtype == 1u) { return unpack2x16float(w); }
  return vec2<f32>(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u));
}

// wg_reduce combines v over the WG invocations of a workgroup (tid: the
// local_invocation_index): their sum, or with is_max their maximum; every
// invocation returns it. A kernel that calls it (or reduce_sum,
// reduce_max) gets WG and the scratch array red with it and runs
// @workgroup_size(WG).
const WG: u32 = 64u;
var<workgroup> red: array<f32, WG>;
fn wg_reduce(v: f32, tid: u32, is_max: bool) -> f32 {
  red[tid] = v;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (tid < k) {
      if (is_max) { red[tid] = max(red[tid], red[tid + k]); } else { red[tid] += red[tid + k]; }
    }
    workgroupBarrier();
  }
  let r = red[0];
  workgroupBarrier();
  return r;
}

// reduce_sum is the sum of v over the workgroup (wg_reduce).
fn reduce_sum(v: f32, tid: u32) -> f32 { return wg_reduce(v, tid, false); }

// reduce_max is the maximum of v over the workgroup (wg_reduce).
fn reduce_max(v: f32, tid: u32) -> f32 { return wg_reduce(v, tid, true); }
