// The KDA inputs of one decoded token, fused (KDAPrep): for each of q, k, v
// the short causal depthwise conv over [carried tail; x] + SiLU, with the
// tail shifted (as conv.wgsl for T = 1); then q and k L2-normalised per
// head (q also scaled), and β = σ(β) in place. One workgroup per (tensor j
// of q/k/v, head h); each thread owns channels i, i + 128, ... of its head,
// so the conv, its tail shift and the rescale never cross threads, and the
// head's sum of squares is one workgroup reduction.
//   X: projections [q | k | v] ([3, H·dk]) at x_off, β [H] at b_off
//   Wt: conv weights [3, H·dk, K] at w_off
//   S: tails, tensor j's [K−1, H·dk] at s_off + j·s_step (oldest first)
//   O: outputs, tensor j's [H·dk] at o_off + j·o_step
struct P {
  H: u32, dk: u32, K: u32, x_off: u32, b_off: u32, w_off: u32,
  s_off: u32, s_step: u32, o_off: u32, o_step: u32, q_scale: f32, eps: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> S: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;

const WG: u32 = 128u;
var<workgroup> red: array<f32, 128>;

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= 3u * p.H) { return; }
  let j = g / p.H;
  let h = g % p.H;
  let C = p.H * p.dk;
  let hist = p.K - 1u;
  let sb = p.s_off + j * p.s_step;
  let ob = p.o_off + j * p.o_step;
  var ss = 0.0;
  for (var i = tid; i < p.dk; i += WG) {
    let c = h * p.dk + i;
    let xv = X[p.x_off + j * C + c];
    let wb = p.w_off + (j * C + c) * p.K;
    var s = Wt[wb + hist] * xv;
    for (var t = 0u; t < hist; t++) { s += Wt[wb + t] * S[sb + t * C + c]; }
    for (var r = 0u; r + 1u < hist; r++) { S[sb + r * C + c] = S[sb + (r + 1u) * C + c]; }
    if (hist > 0u) { S[sb + (hist - 1u) * C + c] = xv; }
    let y = s / (1.0 + exp(-s));
    O[ob + c] = y;
    ss += y * y;
  }
  if (j == 2u) { return; } // v is not normalised
  red[tid] = ss;
  workgroupBarrier();
  for (var st = WG / 2u; st > 0u; st >>= 1u) {
    if (tid < st) { red[tid] += red[tid + st]; }
    workgroupBarrier();
  }
  var inv = 1.0 / sqrt(red[0] + p.eps);
  if (j == 0u) { inv *= p.q_scale; }
  for (var i = tid; i < p.dk; i += WG) {
    let c = h * p.dk + i;
    O[ob + c] = O[ob + c] * inv;
  }
  if (j == 0u && tid == 0u) {
    X[p.b_off + h] = 1.0 / (1.0 + exp(-X[p.b_off + h]));
  }
}
