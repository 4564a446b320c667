// Vision tower ops (core/vision): LayerNorm with bias, bias + GELU,
// 2D RoPE, and non-causal multi-head attention within one image in two
// passes (per key tile partial online softmax, then a combine over tiles).
// All shapes come in the uniform block; row strides let q, k and v be read
// in place from the fused [N, 3·Q] wqkv output.
struct P {
  n: u32, rows: u32, mode: u32, eps: f32,
  x_off: u32, x_stride: u32, w_off: u32, b_off: u32, o_off: u32, o_stride: u32,
  h: u32, hd: u32, tile: u32, nsplit: u32, scale: f32,
  q_off: u32, k_off: u32, v_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> A: array<f32>;
@group(0) @binding(3) var<storage, read_write> B: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;

const WG: u32 = 64u;
var<workgroup> red: array<f32, 64>;

fn wsum(v: f32, tid: u32) -> f32 {
  red[tid] = v;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (tid < k) { red[tid] += red[tid + k]; }
    workgroupBarrier();
  }
  let s = red[0];
  workgroupBarrier();
  return s;
}

// layernorm: one workgroup per row of n; X rows at x_off + r·x_stride,
// weight A[w_off..], bias B[b_off..] when mode bit 0 is set; O may alias X.
// out = (x − μ) / sqrt(σ² + eps) · w + b with the biased variance
// (two passes: mean, then squared deviations).
@compute @workgroup_size(64)
fn layernorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; }
  let xb = p.x_off + r * p.x_stride;
  var s = 0.0;
  for (var i = tid; i < p.n; i += WG) { s += X[xb + i]; }
  let mu = wsum(s, tid) / f32(p.n);
  var ss = 0.0;
  for (var i = tid; i < p.n; i += WG) { let d = X[xb + i] - mu; ss += d * d; }
  let inv = 1.0 / sqrt(wsum(ss, tid) / f32(p.n) + p.eps);
  let ob = p.o_off + r * p.o_stride;
  for (var i = tid; i < p.n; i += WG) {
    var y = ((X[xb + i] - mu) * inv) * A[p.w_off + i];
    if ((p.mode & 1u) != 0u) { y += B[p.b_off + i]; }
    O[ob + i] = y;
  }
}

// erf, Abramowitz & Stegun 7.1.26 (|error| ≤ 1.5e-7).
fn erf_as(x: f32) -> f32 {
  let t = 1.0 / (1.0 + 0.3275911 * abs(x));
  let y = 1.0 - (((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592) * t * exp(-x * x);
  return sign(x) * y;
}

// bias_act: out[r, c] = act(x[r, c] + b[c]) over rows×n with row strides;
// mode bit 0: add the bias A[w_off + c]; bits 1–2: 0 none, 1 GELU-tanh,
// 2 GELU-erf. O may alias X.
@compute @workgroup_size(256)
fn bias_act(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n * p.rows) { return; }
  let r = i / p.n;
  let c = i % p.n;
  var v = X[p.x_off + r * p.x_stride + c];
  if ((p.mode & 1u) != 0u) { v += A[p.w_off + c]; }
  let act = (p.mode >> 1u) & 3u;
  if (act == 1u) {
    v = 0.5 * v * (1.0 + tanh_s(0.7978845608028654 * (v + 0.044715 * v * v * v)));
  } else if (act == 2u) {
    v = 0.5 * v * (1.0 + erf_as(v * 0.7071067811865476));
  }
  O[p.o_off + r * p.o_stride + c] = v;
}

// rope2d: rotates, in place, each head of rows×(h·hd) values of X (row r
// at x_off + r·x_stride) by the tables A = cos, B = sin [rows, hd/2]:
// pair k of a head is (x_2k, x_2k+1) ↦ (x_2k·c − x_2k+1·s, x_2k·s + x_2k+1·c).
// One invocation per (row, head, pair).
@compute @workgroup_size(256)
fn rope2d(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let half = p.hd / 2u;
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.rows * p.h * half) { return; }
  let k = i % half;
  let h = (i / half) % p.h;
  let r = i / (half * p.h);
  let c = A[r * half + k];
  let s = B[r * half + k];
  let o = p.x_off + r * p.x_stride + h * p.hd + 2u * k;
  let a = X[o];
  let b = X[o + 1u];
  X[o] = a * c - b * s;
  X[o + 1u] = a * s + b * c;
}

const MAXHD: u32 = 256u;

// attn_partial: for query n, head h and key tile s (keys [s·tile,
// min(N, (s+1)·tile)), N = rows), an online softmax over the tile:
// O[((s·N + n)·h + head)·(hd + 2) + …] = (acc[0..hd), max, sum) with
// acc = Σ exp(score − max)·v. q, k, v are read from X at q_off/k_off/v_off
// + row·x_stride + head·hd; scores are q·k·scale. One invocation per
// (n, head, s); each loops over at most tile·(2·hd + 1) steps.
@compute @workgroup_size(64)
fn attn_partial(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 64u;
  let N = p.rows;
  if (i >= N * p.h * p.nsplit) { return; }
  let head = i % p.h;
  let n = (i / p.h) % N;
  let s = i / (p.h * N);
  let hd = p.hd;
  let qb = p.q_off + n * p.x_stride + head * hd;
  var acc: array<f32, MAXHD>;
  for (var d = 0u; d < hd; d++) { acc[d] = 0.0; }
  var mx = -3.0e38;
  var sum = 0.0;
  let m1 = min(N, (s + 1u) * p.tile);
  for (var m = s * p.tile; m < m1; m++) {
    let kb = p.k_off + m * p.x_stride + head * hd;
    var dot = 0.0;
    for (var d = 0u; d < hd; d++) { dot += X[qb + d] * X[kb + d]; }
    let sc = dot * p.scale;
    let nm = max(mx, sc);
    let corr = exp(mx - nm);
    let w = exp(sc - nm);
    sum = sum * corr + w;
    let vb = p.v_off + m * p.x_stride + head * hd;
    for (var d = 0u; d < hd; d++) { acc[d] = acc[d] * corr + w * X[vb + d]; }
    mx = nm;
  }
  let ob = ((s * N + n) * p.h + head) * (hd + 2u);
  for (var d = 0u; d < hd; d++) { O[ob + d] = acc[d]; }
  O[ob + hd] = mx;
  O[ob + hd + 1u] = sum;
}

// attn_combine: out[n, head·hd + d] (O at o_off + n·o_stride) from the
// nsplit partials in X: Σ_s e^(m_s − M)·acc_s[d] / Σ_s e^(m_s − M)·l_s.
// One invocation per (n, head, d).
@compute @workgroup_size(256)
fn attn_combine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  let N = p.rows;
  let hd = p.hd;
  if (i >= N * p.h * hd) { return; }
  let d = i % hd;
  let head = (i / hd) % p.h;
  let n = i / (hd * p.h);
  var M = -3.0e38;
  for (var s = 0u; s < p.nsplit; s++) {
    M = max(M, X[((s * N + n) * p.h + head) * (hd + 2u) + hd]);
  }
  var num = 0.0;
  var den = 0.0;
  for (var s = 0u; s < p.nsplit; s++) {
    let b = ((s * N + n) * p.h + head) * (hd + 2u);
    let w = exp(X[b + hd] - M);
    num += w * X[b + d];
    den += w * X[b + hd + 1u];
  }
  O[p.o_off + n * p.o_stride + head * hd + d] = num / den;
}
