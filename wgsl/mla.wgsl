// Multi-head latent attention (NoPE) over a latent cache in a GPU buffer.
// Cache rows are [c_kv (RKV); k_r (DR)] with row stride c_stride; query n
// (absolute position pos0+n) sees cache rows s <= pos0+n. W is kv_b_proj
// [H*(DN+DV), RKV] (f32, or f16/bf16 packed two per word), per head rows
// [W_UK (DN); W_UV (DV)]. Q is [N, H*(DN+DR)], O is [N, H*DV]. T is the
// scratch buffer: q̃/õ at qt_off, split partials at part_off, the expanded
// key/value tile at kv_off, online-softmax stats at st_off. X holds rows
// to append [c_kv; k_r] (row stride x_stride) with c_kv not yet normed, Nu
// the norm's weight; they go to C from word a_off.
//
// The cache is paged (LatentCache): C is bound to one page at a time, whose
// first row is cache row c_row0; pages hold whole 128-row tiles, so a split
// or tile never straddles two pages.
//
// Decode (ref.MLAAbsorbed), 2 dispatches for a context of one split, else
// 2 + (pages), + 1 past the merge's loop budget (+ 1 per further page the
// appended rows reach, for N > 1):
//   absorb_prep    q̃ = W_UKᵀ q_nope (workgroups < nq: one (n, h, r) per
//                  invocation) and, in the same dispatch, the step's own
//                  rows appended to their page, c_kv RMSNormed (one
//                  workgroup per row; with nq = 0 it only appends: the rows
//                  of a prefill piece)
//   absorb_attn    per page: one workgroup per (n, h, split sp0..sp0+nsp of
//                  ≤128 keys in the page): max, sum and Σ p·c_kv over the
//                  split; splits keep every invocation far below lavapipe's
//                  ~65k loop-iteration cap at any context. With a single
//                  split (single = 1: a context of ≤128 keys) the workgroup
//                  has the final õ (into T at qt_off, over q̃) and writes
//                  o = W_UV õ itself
//   absorb_out     one workgroup per (n, h): õ, the splits' partials
//                  merged into T at qt_off (merge = 1; else absorb_combine
//                  merged them there), then o = W_UV õ
//   absorb_combine (only when merging in absorb_out would pass the loop
//                  cap: very long contexts) merge the splits into õ, one
//                  (n, h, r) per invocation
// Prefill (ref.MLANaive), per tile of ≤128 keys: Linear expands the tile to
// [k_nope; v] per head into T at kv_off, then naive_attn (one workgroup per
// (n, h)) folds it into the running max/sum in T and the unnormalised output
// in O (online softmax; the last tile normalises). No T×T buffer is formed.
struct P {
  N: u32, H: u32, DN: u32, DR: u32, DV: u32, RKV: u32, pos0: u32, scale: f32,
  dtype: u32, w_off: u32, w_stride: u32, q_off: u32, c_off: u32, c_stride: u32, o_off: u32,
  qt_off: u32, part_off: u32, nsplit: u32, split: u32,
  k0: u32, kn: u32, last: u32, kv_off: u32, st_off: u32,
  c_row0: u32, sp0: u32, nsp: u32,
  x_off: u32, x_stride: u32, nu_off: u32, eps: f32, nq: u32, rows: u32, merge: u32, single: u32, a_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> Q: array<f32>;
@group(0) @binding(2) var<storage, read_write> W: array<u32>;
@group(0) @binding(3) var<storage, read_write> C: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;
@group(0) @binding(5) var<storage, read_write> T: array<f32>;
@group(0) @binding(6) var<storage, read_write> X: array<f32>;
@group(0) @binding(7) var<storage, read_write> Nu: array<f32>;

const NEG: f32 = -3.0e38;
var<workgroup> sc: array<f32, 128>;

fn wel(row: u32, col: u32) -> f32 {
  let base = p.w_off + row * p.w_stride;
  if (p.dtype == 0u) { return bitcast<f32>(W[base + col]); }
  if (p.dtype > 2u) { return qel(base, p.RKV, col); } // a ggml block format
  let w = W[base + col / 2u];
  let odd = (col & 1u) == 1u;
  if (p.dtype == 1u) { let v = unpack2x16float(w); return select(v.x, v.y, odd); }
  return select(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u), odd);
}

fn qbase(n: u32, h: u32) -> u32 { return p.q_off + (n * p.H + h) * (p.DN + p.DR); }

// part is the word of (n, h) = nh's partial of split sp in T: its max,
// then its sum, then Σ p·c_kv.
fn part(nh: u32, sp: u32) -> u32 { return p.part_off + (nh * p.nsplit + sp) * (p.RKV + 2u); }

@compute @workgroup_size(WG)
fn absorb_prep(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) tid: u32) {
  let gl = wid.x + wid.y * nwg.x;
  if (gl < p.nq) { // q̃ = W_UKᵀ q_nope
    let i = gl * WG + tid;
    if (i < p.N * p.H * p.RKV) {
      let r = i % p.RKV;
      let nh = i / p.RKV;
      let h = nh % p.H;
      let qb = qbase(nh / p.H, h);
      let wr = h * (p.DN + p.DV);
      var acc = 0.0;
      for (var d = 0u; d < p.DN; d++) { acc += Q[qb + d] * wel(wr + d, r); }
      T[p.qt_off + nh * p.RKV + r] = acc;
    }
    return;
  }
  // append row gl − nq: RMSNorm(c_kv; Nu) (ref.RMSNorm), k_r as it is
  let row = gl - p.nq;
  if (row >= p.rows) { return; }
  let xb = p.x_off + row * p.x_stride;
  var ss = 0.0;
  for (var i = tid; i < p.RKV; i += WG) { let v = X[xb + i]; ss += v * v; }
  let inv = 1.0 / sqrt(reduce_sum(ss, tid) / f32(p.RKV) + p.eps);
  let cb = p.a_off + row * p.c_stride;
  for (var i = tid; i < p.RKV + p.DR; i += WG) {
    var v = X[xb + i];
    if (i < p.RKV) { v = (v * inv) * Nu[p.nu_off + i]; }
    C[cb + i] = v;
  }
}

@compute @workgroup_size(WG)
fn absorb_attn(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) tid: u32) {
  let gl = wid.x + wid.y * nwg.x;
  if (gl >= p.N * p.H * p.nsp) { return; }
  let sp = p.sp0 + gl % p.nsp;
  let nh = gl / p.nsp;
  let n = nh / p.H;
  let h = nh % p.H;
  let last = p.pos0 + n;
  let s0 = sp * p.split;
  let pb = part(nh, sp);
  if (s0 > last) { // split entirely after this query: empty partial
    for (var r = tid; r < p.RKV; r += WG) { T[pb + 2u + r] = 0.0; }
    if (tid == 0u) { T[pb] = NEG; T[pb + 1u] = 0.0; }
    return;
  }
  let cnt = min(p.split, last + 1u - s0);
  let qb = qbase(n, h);
  let qt = p.qt_off + nh * p.RKV;
  var lm = NEG;
  let cs = p.c_off + (s0 - p.c_row0) * p.c_stride; // the split's first row in the page
  for (var k = tid; k < cnt; k += WG) {
    let cb = cs + k * p.c_stride;
    var a = 0.0;
    for (var r = 0u; r < p.RKV; r++) { a += T[qt + r] * C[cb + r]; }
    for (var d = 0u; d < p.DR; d++) { a += Q[qb + p.DN + d] * C[cb + p.RKV + d]; }
    a *= p.scale;
    sc[k] = a;
    lm = max(lm, a);
  }
  let m = reduce_max(lm, tid);
  var ls = 0.0;
  for (var k = tid; k < cnt; k += WG) { let e = exp(sc[k] - m); sc[k] = e; ls += e; }
  let l = reduce_sum(ls, tid);
  // the only split (single): õ is final; it replaces q̃, read by now
  if (p.single == 1u) { storageBarrier(); }
  for (var r = tid; r < p.RKV; r += WG) {
    var a = 0.0;
    for (var k = 0u; k < cnt; k++) { a += sc[k] * C[cs + k * p.c_stride + r]; }
    if (p.single == 1u) { T[qt + r] = a / l; } else { T[pb + 2u + r] = a; }
  }
  if (p.single == 1u) {
    storageBarrier();
    for (var j = tid; j < p.DV; j += WG) { O[p.o_off + nh * p.DV + j] = out_dot(nh, j); }
    return;
  }
  if (tid == 0u) { T[pb] = m; T[pb + 1u] = l; }
}

// out_dot is o[j] = (W_UV õ)[j] of nh, with õ in T at qt_off.
fn out_dot(nh: u32, j: u32) -> f32 {
  let wr = (nh % p.H) * (p.DN + p.DV) + p.DN + j;
  let ot = p.qt_off + nh * p.RKV;
  var acc = 0.0;
  for (var r = 0u; r < p.RKV; r++) { acc += wel(wr, r) * T[ot + r]; }
  return acc;
}

// merged is õ[r] of nh: the splits' partials merged (m: the largest of
// their maxima) and normalised, the online softmax of ref.MLAAbsorbed.
fn merged(nh: u32, r: u32, m: f32) -> f32 {
  var num = 0.0;
  var den = 0.0;
  for (var s = 0u; s < p.nsplit; s++) {
    let b = part(nh, s);
    if (T[b + 1u] > 0.0) {
      let w = exp(T[b] - m);
      num += w * T[b + 2u + r];
      den += w * T[b + 1u];
    }
  }
  return num / den;
}

@compute @workgroup_size(WG)
fn absorb_combine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * WG;
  if (i >= p.N * p.H * p.RKV) { return; }
  let r = i % p.RKV;
  let nh = i / p.RKV;
  var m = NEG;
  for (var s = 0u; s < p.nsplit; s++) { m = max(m, T[part(nh, s)]); }
  T[p.qt_off + nh * p.RKV + r] = merged(nh, r, m);
}

@compute @workgroup_size(WG)
fn absorb_out(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) tid: u32) {
  let nh = wid.x + wid.y * nwg.x;
  if (nh >= p.N * p.H) { return; }
  if (p.merge == 1u) {
    var lm = NEG;
    for (var s = tid; s < p.nsplit; s += WG) { lm = max(lm, T[part(nh, s)]); }
    let m = reduce_max(lm, tid);
    for (var r = tid; r < p.RKV; r += WG) { T[p.qt_off + nh * p.RKV + r] = merged(nh, r, m); }
    storageBarrier();
  }
  for (var j = tid; j < p.DV; j += WG) { O[p.o_off + nh * p.DV + j] = out_dot(nh, j); }
}

@compute @workgroup_size(WG)
fn naive_attn(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) tid: u32) {
  let nh = wid.x + wid.y * nwg.x;
  if (nh >= p.N * p.H) { return; }
  let n = nh / p.H;
  let h = nh % p.H;
  let last = p.pos0 + n;
  let st = p.st_off + 2u * nh;
  let ob = p.o_off + nh * p.DV;
  var m_old = NEG;
  var l_old = 0.0;
  if (p.k0 > 0u) { m_old = T[st]; l_old = T[st + 1u]; }
  if (p.k0 > last) { // nothing visible in this tile
    if (p.last == 1u) {
      for (var j = tid; j < p.DV; j += WG) { O[ob + j] = O[ob + j] / l_old; }
    }
    return;
  }
  let cnt = min(p.kn, last + 1u - p.k0);
  let rows = p.H * (p.DN + p.DV);
  let hb = p.kv_off + h * (p.DN + p.DV);
  let qb = qbase(n, h);
  var lm = NEG;
  for (var k = tid; k < cnt; k += WG) {
    let kb = hb + k * rows;
    let cb = p.c_off + (p.k0 - p.c_row0 + k) * p.c_stride + p.RKV;
    var a = 0.0;
    for (var d = 0u; d < p.DN; d++) { a += Q[qb + d] * T[kb + d]; }
    for (var d = 0u; d < p.DR; d++) { a += Q[qb + p.DN + d] * C[cb + d]; }
    a *= p.scale;
    sc[k] = a;
    lm = max(lm, a);
  }
  let m_new = max(m_old, reduce_max(lm, tid));
  var ls = 0.0;
  for (var k = tid; k < cnt; k += WG) { let e = exp(sc[k] - m_new); sc[k] = e; ls += e; }
  let alpha = exp(m_old - m_new);
  let l_new = l_old * alpha + reduce_sum(ls, tid);
  for (var j = tid; j < p.DV; j += WG) {
    var a = 0.0;
    if (p.k0 > 0u) { a = O[ob + j] * alpha; }
    for (var k = 0u; k < cnt; k++) { a += sc[k] * T[hb + k * rows + p.DN + j]; }
    if (p.last == 1u) { a /= l_new; }
    O[ob + j] = a;
  }
  if (tid == 0u) { T[st] = m_new; T[st + 1u] = l_new; }
}
