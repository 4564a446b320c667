// Block Attention Residuals read (ref.AttnRes), one workgroup per token over
// nsrc <= 64 sources of d values (source i of token t at
// src_off + t*tok_stride + i*src_stride):
//   score_i = Σ_c (v_i[c] / sqrt(mean(v_i²) + eps)) γ[c] w[c]
//   out = Σ_i softmax(score)_i v_i
// With norm, the RMSNorm that follows every AttnRes read in the model is
// applied too (one dispatch instead of two): out = ν ⊙ h / sqrt(mean(h²) +
// neps) for h = Σ_i softmax(score)_i v_i and the norm weight ν at n_off.
struct P {
  d: u32, nsrc: u32, T: u32, eps: f32,
  src_off: u32, src_stride: u32, tok_stride: u32,
  w_off: u32, g_off: u32, o_off: u32, o_stride: u32,
  norm: u32, n_off: u32, neps: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> SRC: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wq: array<f32>;
@group(0) @binding(3) var<storage, read_write> GM: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read_write> NW: array<f32>;

const WG: u32 = 64u;
var<workgroup> r1: array<f32, 64>;
var<workgroup> r2: array<f32, 64>;
var<workgroup> score: array<f32, 64>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.T) { return; }
  let tb = p.src_off + t * p.tok_stride;
  for (var i = 0u; i < p.nsrc; i++) {
    let vb = tb + i * p.src_stride;
    var ss = 0.0;
    var dt = 0.0;
    for (var c = tid; c < p.d; c += WG) {
      let x = SRC[vb + c];
      ss += x * x;
      dt += x * GM[p.g_off + c] * Wq[p.w_off + c];
    }
    r1[tid] = ss;
    r2[tid] = dt;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
      if (tid < k) { r1[tid] += r1[tid + k]; r2[tid] += r2[tid + k]; }
      workgroupBarrier();
    }
    if (tid == 0u) { score[i] = r2[0] / sqrt(r1[0] / f32(p.d) + p.eps); }
    workgroupBarrier();
  }
  var m = score[0];
  for (var i = 1u; i < p.nsrc; i++) { m = max(m, score[i]); }
  var sum = 0.0;
  for (var i = 0u; i < p.nsrc; i++) { sum += exp(score[i] - m); }
  let ob = p.o_off + t * p.o_stride;
  var ss = 0.0;
  for (var c = tid; c < p.d; c += WG) {
    var a = 0.0;
    for (var i = 0u; i < p.nsrc; i++) { a += exp(score[i] - m) / sum * SRC[tb + i * p.src_stride + c]; }
    O[ob + c] = a;
    ss += a * a;
  }
  if (p.norm == 1u) {
    // each thread rescales the values it wrote: no cross-thread hazard
    r1[tid] = ss;
    workgroupBarrier();
    for (var k = WG / 2u; k > 0u; k >>= 1u) {
      if (tid < k) { r1[tid] += r1[tid + k]; }
      workgroupBarrier();
    }
    let inv = 1.0 / sqrt(r1[0] / f32(p.d) + p.neps);
    for (var c = tid; c < p.d; c += WG) { O[ob + c] = (O[ob + c] * inv) * NW[p.n_off + c]; }
  }
}
