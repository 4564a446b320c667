// One decoded token of a KDA mixer, fused (KDAStep: KDAPrep then the delta
// rule, T = 1). One workgroup per head h, so everything the head needs is
// computed once, in its workgroup, and no conv tail is read by one
// workgroup and written by another. Thread tid owns channels
// i = tid, tid + 64, … of the head (i < dk):
//   q_i, k_i, v_i = conv_silu of the projections (tails shifted, CT)
//   e_i = exp(KDAGate(W[h·dk + i]·X[fa_off ..]))   (f_b row, as kda_prep.wgsl)
// then, after the head's sums of squares (one workgroup reduction each),
//   q ← q·q_scale/‖q‖, k ← k/‖k‖ (eps inside the root), β = σ(β_h)
// and for each value column j it owns (as kda.wgsl, dv = dk):
//   s_d ← e_d·s_d;  u = β (v_j − Σ_d k_d s_d);  s_d ← s_d + k_d u;
//   o_j = Σ_d q_d s_d
//   X: projections [q | k | v] ([3, H·dk]) at x_off, β [H] at b_off, f_a's
//      output (cols) at fa_off
//   Wt: conv weights [3, H·dk, K] at w_off
//   CT: tails, tensor j's [K−1, H·dk] at t_off + j·t_step (oldest first)
//   S: the state [H, dk, dk] at s_off (in place); O: o [H·dk] at o_off
//   W: f_b [H·dk, cols] (dtype as linear.wgsl's, block formats QT) at
//      gw_off, rows gw_stride words apart
//   E: dt_bias [H·dk] at bias_off, A_log [H·dk] or [H] at alog_off
struct P {
  H: u32, dk: u32, K: u32, x_off: u32, b_off: u32, w_off: u32, t_off: u32, t_step: u32,
  s_off: u32, o_off: u32, q_scale: f32, eps: f32,
  cols: u32, dtype: u32, gw_off: u32, gw_stride: u32, fa_off: u32,
  bias_off: u32, alog_off: u32, per_channel: u32, bounded: u32, lb: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> CT: array<f32>;
@group(0) @binding(4) var<storage, read_write> S: array<f32>;
@group(0) @binding(5) var<storage, read_write> O: array<f32>;
@group(0) @binding(6) var<storage, read_write> W: array<u32>;
@group(0) @binding(7) var<storage, read_write> E: array<f32>;

// DK is the largest head the workgroup arrays hold (wgsl.kdaStepDKMax).
const DK: u32 = 256u;
var<workgroup> qs: array<f32, DK>;
var<workgroup> ks: array<f32, DK>;
var<workgroup> vs: array<f32, DK>;
var<workgroup> es: array<f32, DK>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let h = wid.x;
  let C = p.H * p.dk;
  var sq = 0.0;
  var sk = 0.0;
  for (var i = tid; i < p.dk; i += WG) {
    let c = h * p.dk + i;
    let q = conv_silu(X[p.x_off + c], p.w_off + c * p.K, p.t_off, C, c, p.K);
    let k = conv_silu(X[p.x_off + C + c], p.w_off + (C + c) * p.K, p.t_off + p.t_step, C, c, p.K);
    vs[i] = conv_silu(X[p.x_off + 2u * C + c], p.w_off + (2u * C + c) * p.K, p.t_off + 2u * p.t_step, C, c, p.K);
    qs[i] = q;
    ks[i] = k;
    sq += q * q;
    sk += k * k;
    var al: f32;
    if (p.per_channel == 1u) { al = E[p.alog_off + c]; } else { al = E[p.alog_off + h]; }
    let raw = row_dot(p.gw_off + c * p.gw_stride, p.cols, p.fa_off, 0u, 1u, QT != 0u);
    es[i] = exp(kda_gate(raw, E[p.bias_off + c], al, p.bounded == 1u, p.lb));
  }
  // The reductions' barriers also make the arrays above visible to all.
  var iq = 1.0 / sqrt(reduce_sum(sq, tid) + p.eps);
  iq *= p.q_scale;
  let ik = 1.0 / sqrt(reduce_sum(sk, tid) + p.eps);
  for (var i = tid; i < p.dk; i += WG) {
    qs[i] = qs[i] * iq;
    ks[i] = ks[i] * ik;
  }
  workgroupBarrier();
  let beta = 1.0 / (1.0 + exp(-X[p.b_off + h]));
  for (var j = tid; j < p.dk; j += WG) {
    let sb = p.s_off + h * p.dk * p.dk + j;
    var pred = 0.0;
    for (var d = 0u; d < p.dk; d++) {
      let s = S[sb + d * p.dk] * es[d];
      S[sb + d * p.dk] = s;
      pred += ks[d] * s;
    }
    let u = beta * (vs[j] - pred);
    var o = 0.0;
    for (var d = 0u; d < p.dk; d++) {
      let s = S[sb + d * p.dk] + ks[d] * u;
      S[sb + d * p.dk] = s;
      o += qs[d] * s;
    }
    O[p.o_off + h * p.dk + j] = o;
  }
}
