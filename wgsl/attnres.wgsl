// Block Attention Residuals read (ref.AttnRes), one workgroup per token over
// nsrc <= 64 sources of d values (source i of token t at
// src_off + t*tok_stride + i*src_stride; common.wgsl's res_weights):
//   score_i = Σ_c (v_i[c] / sqrt(mean(v_i²) + eps)) γ[c] w[c]
//   out = Σ_i softmax(score)_i v_i
// With norm, the RMSNorm that follows every AttnRes read in the model is
// applied too (one dispatch instead of two): out = ν ⊙ h / sqrt(mean(h²) +
// neps) for h = Σ_i softmax(score)_i v_i and the norm weight ν at n_off.
// (A decoded token's read usually runs inside the GEMV that reads it:
// linear.wgsl's gemv_res.)
struct P {
  d: u32, nsrc: u32, T: u32, eps: f32,
  src_off: u32, src_stride: u32, tok_stride: u32,
  w_off: u32, g_off: u32, o_off: u32, o_stride: u32,
  norm: u32, n_off: u32, neps: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;  // sources
@group(0) @binding(2) var<storage, read_write> E: array<f32>;  // w
@group(0) @binding(3) var<storage, read_write> EG: array<f32>; // γ
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read_write> NW: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.T) { return; }
  let tb = p.src_off + t * p.tok_stride;
  res_weights(tb, p.src_stride, p.nsrc, p.d, p.w_off, p.g_off, p.eps, tid);
  let ob = p.o_off + t * p.o_stride;
  var ss = 0.0;
  for (var c = tid; c < p.d; c += WG) {
    let a = res_val(tb, p.src_stride, p.nsrc, c);
    O[ob + c] = a;
    ss += a * a;
  }
  if (p.norm == 1u) {
    // each thread rescales the values it wrote: no cross-thread hazard
    let inv = 1.0 / sqrt(reduce_sum(ss, tid) / f32(p.d) + p.neps);
    for (var c = tid; c < p.d; c += WG) { O[ob + c] = (O[ob + c] * inv) * NW[p.n_off + c]; }
  }
}
