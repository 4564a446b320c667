// KDA prefill in the chunked WY/UT form (ref.KDAChunked), two passes:
// this file is the first, kda_chunk_inter.wgsl the second.
//
// intra: one workgroup per (chunk c of n ≤ C tokens, head h), all chunks
// in parallel. With G_i the inclusive cumulative log-decay in the chunk
// (G_i ≤ 0 and G_i − G_j ≤ 0 for j ≤ i: every exponential below is of a
// non-positive number, in [0, 1]; never exp(−G), which overflows):
//   QE_i = exp(G_i) ⊙ Q_i
//   L_ij = β_i Σ_d K_i[d] K_j[d] exp(G_i[d] − G_j[d])      j < i
//   A_ij =     Σ_d Q_i[d] K_j[d] exp(G_i[d] − G_j[d])      j ≤ i
//   U = (I+L)^{-1} (β ⊙ V),  W = (I+L)^{-1} (β ⊙ exp(G) ⊙ K)
//   (by forward substitution)
//   KD_j = exp(G_{n−1} − G_j) ⊙ K_j,  EL = exp(G_{n−1})
// written to the scratch X, one block per (c, h) (kdaChunkLayout in
// kda_chunk.go).
//
// inter: one invocation per (head h, value column j), chunks in order (the
// columns of S are independent, as in kda.wgsl):
//   Vnew_i = U_i − W_i·S;  O_i = QE_i·S + Σ_{m≤i} A_im Vnew_m
//   S ← EL ⊙ S + Σ_m KD_m Vnew_m
// with the S column and Vnew in private memory. A dispatch runs chunks
// [c0, c1), so no invocation loops more than loopBudget (lavapipe's cap).
struct P {
  T: u32, H: u32, DK: u32, DV: u32, C: u32,
  // block layout (kdaChunkLayout): block size, then the offsets of W, KD,
  // U, A and EL in a block (QE at 0)
  bs: u32, r_w: u32, r_kd: u32, r_u: u32, r_a: u32, r_el: u32,
  x_off: u32, q_off: u32, k_off: u32, v_off: u32, g_off: u32, b_off: u32, o_off: u32, s_off: u32,
  c0: u32, c1: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Q: array<f32>;
@group(0) @binding(3) var<storage, read_write> K: array<f32>;
@group(0) @binding(4) var<storage, read_write> V: array<f32>;
@group(0) @binding(5) var<storage, read_write> G: array<f32>;
@group(0) @binding(6) var<storage, read_write> B: array<f32>;

// CMAX is the largest chunk (kdaChunkMax in kda_chunk.go): L lives in
// workgroup memory, CMAX² words.
const CMAX = 32u;
var<workgroup> L: array<f32, 1024>;

// Blk is the scratch words of chunk c, head h (kdaChunkLayout).
struct Blk { qe: u32, w: u32, kd: u32, u: u32, a: u32, el: u32 }

fn blk(c: u32, h: u32) -> Blk {
  let base = p.x_off + (c * p.H + h) * p.bs;
  return Blk(base, base + p.r_w, base + p.r_kd, base + p.r_u, base + p.r_a, base + p.r_el);
}

@compute @workgroup_size(64)
fn intra(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let c = wid.x;
  let h = wid.y;
  let t0 = c * p.C;
  let n = min(p.C, p.T - t0);
  let b = blk(c, h);
  // Cumulative log-decays per channel d (kept in KD for now), QE and
  // W's right-hand side β exp(G) ⊙ K.
  for (var d = tid; d < p.DK; d += 64u) {
    var gs = 0.0;
    for (var i = 0u; i < n; i++) {
      let x = ((t0 + i) * p.H + h) * p.DK + d;
      gs += G[p.g_off + x];
      let e = exp(gs);
      X[b.qe + i * p.DK + d] = Q[p.q_off + x] * e;
      X[b.w + i * p.DK + d] = B[p.b_off + (t0 + i) * p.H + h] * K[p.k_off + x] * e;
      X[b.kd + i * p.DK + d] = gs;
    }
    X[b.el + d] = exp(gs);
  }
  storageBarrier();
  workgroupBarrier();
  // L and A over the lower triangle (pair e ↔ row i, column j ≤ i).
  let npair = n * (n + 1u) / 2u;
  for (var e = tid; e < npair; e += 64u) {
    var i = u32((sqrt(8.0 * f32(e) + 1.0) - 1.0) * 0.5);
    if ((i + 1u) * (i + 2u) / 2u <= e) { i++; }
    if (i * (i + 1u) / 2u > e) { i--; }
    let j = e - i * (i + 1u) / 2u;
    let xi = ((t0 + i) * p.H + h) * p.DK;
    let xj = ((t0 + j) * p.H + h) * p.DK;
    var sl = 0.0;
    var sa = 0.0;
    for (var d = 0u; d < p.DK; d++) {
      let kj = K[p.k_off + xj + d] * exp(min(X[b.kd + i * p.DK + d] - X[b.kd + j * p.DK + d], 0.0));
      sl += K[p.k_off + xi + d] * kj;
      sa += Q[p.q_off + xi + d] * kj;
    }
    L[i * CMAX + j] = select(0.0, B[p.b_off + (t0 + i) * p.H + h] * sl, j < i);
    X[b.a + i * p.C + j] = sa;
  }
  storageBarrier();
  workgroupBarrier();
  // KD_j = exp(G_{n−1} − G_j) ⊙ K_j (replacing G_j).
  for (var d = tid; d < p.DK; d += 64u) {
    let gl = X[b.kd + (n - 1u) * p.DK + d];
    for (var j = 0u; j < n; j++) {
      let x = b.kd + j * p.DK + d;
      X[x] = K[p.k_off + ((t0 + j) * p.H + h) * p.DK + d] * exp(min(gl - X[x], 0.0));
    }
  }
  // Forward substitution, one column of U (x < DV) or of W per step:
  // row_i ← rhs_i − Σ_{j<i} L_ij row_j.
  for (var x = tid; x < p.DV + p.DK; x += 64u) {
    var col = b.u + x;
    var stride = p.DV;
    if (x >= p.DV) {
      col = b.w + x - p.DV;
      stride = p.DK;
    }
    for (var i = 0u; i < n; i++) {
      var r = X[col + i * stride];
      if (x < p.DV) {
        let t = (t0 + i) * p.H + h;
        r = B[p.b_off + t] * V[p.v_off + t * p.DV + x];
      }
      for (var j = 0u; j < i; j++) {
        r -= L[i * CMAX + j] * X[col + j * stride];
      }
      X[col + i * stride] = r;
    }
  }
}
