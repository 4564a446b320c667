// KDA recurrent decode (ref.KDARecurrent), one invocation per (head h,
// value column j): columns of the state S [H, DK, DV] are independent
// (architecture.md §1.3), so column j needs only q, k, g, beta broadcast
// and no cross-invocation reduction. Per token:
//   s_d ← exp(g_d)·s_d;  u = β (v_j − Σ_d k_d s_d);  s_d ← s_d + k_d u;
//   o_j = Σ_d q_d s_d
// S is updated in place in global memory (adjacent j are adjacent words).
struct P {
  T: u32, H: u32, DK: u32, DV: u32,
  q_off: u32, k_off: u32, v_off: u32, g_off: u32, b_off: u32, o_off: u32, s_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> Q: array<f32>;
@group(0) @binding(2) var<storage, read_write> K: array<f32>;
@group(0) @binding(3) var<storage, read_write> V: array<f32>;
@group(0) @binding(4) var<storage, read_write> G: array<f32>;
@group(0) @binding(5) var<storage, read_write> B: array<f32>;
@group(0) @binding(6) var<storage, read_write> O: array<f32>;
@group(0) @binding(7) var<storage, read_write> S: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let j = wid.x * 64u + tid;
  let h = wid.y;
  if (j >= p.DV || h >= p.H) { return; }
  let sb = p.s_off + h * p.DK * p.DV + j;
  for (var t = 0u; t < p.T; t++) {
    let kq = (t * p.H + h) * p.DK;
    var pred = 0.0;
    for (var d = 0u; d < p.DK; d++) {
      let s = S[sb + d * p.DV] * exp(G[p.g_off + kq + d]);
      S[sb + d * p.DV] = s;
      pred += K[p.k_off + kq + d] * s;
    }
    let ov = (t * p.H + h) * p.DV + j;
    let u = B[p.b_off + t * p.H + h] * (V[p.v_off + ov] - pred);
    var o = 0.0;
    for (var d = 0u; d < p.DK; d++) {
      let s = S[sb + d * p.DV] + K[p.k_off + kq + d] * u;
      S[sb + d * p.DV] = s;
      o += Q[p.q_off + kq + d] * s;
    }
    O[p.o_off + ov] = o;
  }
}
