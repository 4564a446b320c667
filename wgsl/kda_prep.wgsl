// The KDA inputs of one decoded token, fused (KDAPrep): for each of q, k, v
// the short causal depthwise conv over [carried tail; x] + SiLU, with the
// tail shifted (as conv.wgsl for T = 1); then q and k L2-normalised per
// head (q also scaled), and β = σ(β) in place. One workgroup per (tensor j
// of q/k/v, head h); each thread owns channels i, i + 128, ... of its head,
// so the conv, its tail shift and the rescale never cross threads, and the
// head's sum of squares is one workgroup reduction.
//   X: projections [q | k | v] ([3, H·dk]) at x_off, β [H] at b_off
//   Wt: conv weights [3, H·dk, K] at w_off
//   CT: tails, tensor j's [K−1, H·dk] at s_off + j·s_step (oldest first)
//   O: outputs, tensor j's [H·dk] at o_off + j·o_step
// With gate 1 the workgroups after the first 3·H also compute the KDA
// gate of the step (LinearKDAGate: its projection f_b with the gate as
// epilogue, independent of the conv), 16 rows each, 8 threads per row:
//   GO[go_off + r] = KDAGate(W[r]·X[fa_off ..]) for r < rows (H·dk)
// with W (f_b: rows × cols, dtype as linear.wgsl's, block formats QT),
// dt_bias E[bias_off + r] and A_log E[alog_off + r or r / dk].
struct P {
  H: u32, dk: u32, K: u32, x_off: u32, b_off: u32, w_off: u32,
  s_off: u32, s_step: u32, o_off: u32, o_step: u32, q_scale: f32, eps: f32,
  gate: u32, rows: u32, cols: u32, dtype: u32, gw_off: u32, gw_stride: u32, fa_off: u32, go_off: u32,
  bias_off: u32, alog_off: u32, per_channel: u32, bounded: u32, lb: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> CT: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read_write> W: array<u32>;
@group(0) @binding(6) var<storage, read_write> E: array<f32>;
@group(0) @binding(7) var<storage, read_write> GO: array<f32>;

const WG: u32 = 128u;
var<workgroup> red: array<f32, 128>;

// gate_rows is gate workgroup gi's 16 rows of the KDA gate (see above).
fn gate_rows(gi: u32, tid: u32) {
  let lane = tid % 8u;
  let r = gi * 16u + tid / 8u;
  var acc = 0.0;
  if (r < p.rows) { acc = row_dot(p.gw_off + r * p.gw_stride, p.cols, p.fa_off, lane, 8u, QT != 0u); }
  red[tid] = acc;
  workgroupBarrier();
  for (var s = 4u; s > 0u; s >>= 1u) {
    if (lane < s) { red[tid] += red[tid + s]; }
    workgroupBarrier();
  }
  if (lane == 0u && r < p.rows) {
    var al: f32;
    if (p.per_channel == 1u) { al = E[p.alog_off + r]; } else { al = E[p.alog_off + r / p.dk]; }
    GO[p.go_off + r] = kda_gate(red[tid], E[p.bias_off + r], al, p.bounded == 1u, p.lb);
  }
}

@compute @workgroup_size(128)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= 3u * p.H) {
    if (p.gate == 1u) { gate_rows(g - 3u * p.H, tid); }
    return;
  }
  let j = g / p.H;
  let h = g % p.H;
  let C = p.H * p.dk;
  let sb = p.s_off + j * p.s_step;
  let ob = p.o_off + j * p.o_step;
  var ss = 0.0;
  for (var i = tid; i < p.dk; i += WG) {
    let c = h * p.dk + i;
    let y = conv_silu(X[p.x_off + j * C + c], p.w_off + (j * C + c) * p.K, sb, C, c, p.K);
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
