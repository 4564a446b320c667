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

// log1p_s is log(1+e), accurate for small e (WGSL has no log1p).
fn log1p_s(e: f32) -> f32 {
  let u = 1.0 + e;
  if (u == 1.0) { return e; }
  return log(u) * e / (u - 1.0);
}

// kda_gate is the KDA log-decay gate (ref.KDAGate) of a projection's value
// raw for a channel with dt_bias bias and log-decay rate al:
//   bounded:  lb·σ(exp(al)·(raw + bias))
//   softplus: −exp(al)·softplus(raw + bias)
fn kda_gate(raw: f32, bias: f32, al: f32, bounded: bool, lb: f32) -> f32 {
  let a = exp(al);
  let x = raw + bias;
  if (bounded) { return lb / (1.0 + exp(-(a * x))); }
  return -a * (max(x, 0.0) + log1p_s(exp(-abs(x))));
}

// conv_silu is channel c's output for one token of the short causal
// depthwise conv (ref.ShortConv, T = 1) over [tail; xv] with the K weights
// at Wt[wb ..], then SiLU; the channel's tail in the including kernel's CT
// (K−1 rows of C words at tb, oldest first) is shifted by one, xv last.
fn conv_silu(xv: f32, wb: u32, tb: u32, C: u32, c: u32, K: u32) -> f32 {
  let hist = K - 1u;
  var s = Wt[wb + hist] * xv;
  for (var t = 0u; t < hist; t++) { s += Wt[wb + t] * CT[tb + t * C + c]; }
  for (var r = 0u; r + 1u < hist; r++) { CT[tb + r * C + c] = CT[tb + (r + 1u) * C + c]; }
  if (hist > 0u) { CT[tb + (hist - 1u) * C + c] = xv; }
  return s / (1.0 + exp(-s));
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

// half_f32 is the IEEE half with bits h (low 16) as f32, exactly
// (subnormals included: no reliance on unpack2x16float's flushing rules).
fn half_f32(h: u32) -> f32 {
  let s = (h & 0x8000u) << 16u;
  let e = (h >> 10u) & 31u;
  let m = h & 1023u;
  if (e == 0u) { return bitcast<f32>(s | bitcast<u32>(f32(m) * bitcast<f32>(0x33800000u))); } // m·2^-24
  if (e == 31u) { return bitcast<f32>(s | 0x7f800000u | (m << 13u)); }
  return bitcast<f32>(s | ((e + 112u) << 23u) | (m << 13u));
}

// wbyte is byte i (counted from W[0]'s low byte) of the including
// kernel's weight words W.
fn wbyte(i: u32) -> u32 {
  return (W[i >> 2u] >> ((i & 3u) * 8u)) & 255u;
}

// qbody is the words of one block's body for block dtype dt (tensor.DType
// values: 3 Q8, 4 Q8_0, 5 Q4_0, 6 Q4_K, 7 Q5_K, 8 Q6_K, 9 MXFP4, 11
// Q5_0). On the GPU (wgsl.PackMat) a row of a block-format matrix is its
// blocks' bodies (the block's bytes less its f16 / E8M0 scale, whole
// words), then the scales packed (two f16 or four E8M0 per word); Q4_K and
// Q5_K blocks are whole words and stay whole; a Q8 row is its int8 values
// (8 words per 32) and then its float32 scale.
fn qbody(dt: u32) -> u32 {
  switch dt {
    case 3u, 4u: { return 8u; }
    case 5u, 9u: { return 4u; }
    case 11u: { return 5u; }
    case 6u: { return 36u; }
    case 7u: { return 44u; }
    default: { return 52u; }
  }
}

// qscale is what unit u (elements 32u..32u+31) of the block-format row at
// word base (cols columns, dtype QT: the constant the loader defines for a
// module specialised to one block format, Device.weightKernel) scales by: x the multiplier
// (Q4_K/Q5_K: d·scale; Q6_K: d·scale of elements 0..15; Q8: the row's
// scale), y the K-quants'
// offset dmin·min, z Q6_K's d·scale of elements 16..31. Each product is
// rounded as ggml's dequantizer rounds it (tensor.Dequantize).
fn qscale(base: u32, cols: u32, u: u32) -> vec4<f32> {
  let dt = QT;
  if (dt == 3u) { return vec4<f32>(bitcast<f32>(W[base + cols / 4u]), 0.0, 0.0, 0.0); }
  if (dt == 6u || dt == 7u) {
    let bb = base + (u / 8u) * qbody(dt);
    let dm = W[bb];
    let j = u % 8u;
    let q = 4u * (bb + 1u); // the 12 scale bytes
    var s6: u32; // ggml's get_scale_min_k4
    var m6: u32;
    if (j < 4u) {
      s6 = wbyte(q + j) & 63u;
      m6 = wbyte(q + j + 4u) & 63u;
    } else {
      s6 = (wbyte(q + j + 4u) & 15u) | ((wbyte(q + j - 4u) >> 6u) << 4u);
      m6 = (wbyte(q + j + 4u) >> 4u) | ((wbyte(q + j) >> 6u) << 4u);
    }
    return vec4<f32>(half_f32(dm & 0xffffu) * f32(s6), half_f32(dm >> 16u) * f32(m6), 0.0, 0.0);
  }
  let bl = select(32u, 256u, dt == 8u);
  let sb = 4u * (base + (cols / bl) * qbody(dt)); // the scales' first byte
  if (dt == 9u) {
    let e = wbyte(sb + u);
    if (e < 2u) { return vec4<f32>(bitcast<f32>(0x00200000u << e), 0.0, 0.0, 0.0); }
    return vec4<f32>(bitcast<f32>((e - 1u) << 23u), 0.0, 0.0, 0.0);
  }
  if (dt == 8u) {
    let b = u / 8u;
    let c = u % 8u;
    let d = half_f32(wbyte(sb + 2u * b) | (wbyte(sb + 2u * b + 1u) << 8u));
    let si = 4u * (base + b * 52u) + 192u + 8u * (c / 4u) + 2u * (c % 4u);
    let s1 = f32((i32(wbyte(si) << 24u)) >> 24u);
    let s2 = f32((i32(wbyte(si + 1u) << 24u)) >> 24u);
    return vec4<f32>(d * s1, 0.0, d * s2, 0.0);
  }
  return vec4<f32>(half_f32(wbyte(sb + 2u * u) | (wbyte(sb + 2u * u + 1u) << 8u)), 0.0, 0.0, 0.0);
}

// qints is the quants of elements 4i..4i+3 of unit u (elements
// 32u..32u+31, i < 8) of the block-format row at word base (QT, cols
// columns), as the small integers the scales multiply: Q8 and Q8_0 q, Q4_0 q−8,
// Q5_0 q−16, MXFP4 the doubled E2M1 value, Q4_K/Q5_K q, Q6_K q−32.
fn qints(base: u32, cols: u32, u: u32, i: u32) -> vec4<f32> {
  let dt = QT;
  let by = vec4<u32>(0u, 8u, 16u, 24u);
  switch dt {
    case 3u, 4u: { // Q8, Q8_0: int8
      let w = W[base + u * 8u + i];
      return vec4<f32>(vec4<i32>(vec4<u32>(w) << (vec4<u32>(24u) - by)) >> vec4<u32>(24u));
    }
    case 5u, 9u, 11u: { // Q4_0, MXFP4, Q5_0: element j of 0..15 in the low nibble of byte j, j+16 in the high one
      let bw = qbody(dt);
      let w = W[base + u * bw + (bw - 4u) + (i & 3u)];
      var q = (vec4<u32>(w) >> (by + vec4<u32>((i >> 2u) * 4u))) & vec4<u32>(15u);
      if (dt == 5u) { return vec4<f32>(vec4<i32>(q) - vec4<i32>(8)); }
      if (dt == 11u) { // the fifth bits: bit j of the word qh
        let qh = W[base + u * 5u];
        let bit = vec4<u32>(4u * (i & 3u) + 16u * (i >> 2u)) + vec4<u32>(0u, 1u, 2u, 3u);
        q |= ((vec4<u32>(qh) >> bit) & vec4<u32>(1u)) << vec4<u32>(4u);
        return vec4<f32>(vec4<i32>(q) - vec4<i32>(16));
      }
      let m = q & vec4<u32>(7u); // E2M1 doubled: 0 1 2 3 4 6 8 12, bit 3 the sign
      let mag = select(vec4<f32>((vec4<u32>(2u) + (m & vec4<u32>(1u))) << ((m >> vec4<u32>(1u)) - vec4<u32>(1u))),
                       vec4<f32>(m), m < vec4<u32>(2u));
      return select(mag, -mag, (q & vec4<u32>(8u)) != vec4<u32>(0u));
    }
    case 6u, 7u: { // Q4_K, Q5_K: sub-block j of a block is the nibbles (low for even j) of qs[32(j/2)..]
      let bb = base + (u / 8u) * qbody(dt);
      let j = u % 8u;
      let qs = select(4u, 12u, dt == 7u);
      let w = W[bb + qs + 8u * (j / 2u) + i];
      var q = (vec4<u32>(w) >> (by + vec4<u32>(4u * (j & 1u)))) & vec4<u32>(15u);
      if (dt == 7u) { // the fifth bits: bit j of qh[l]
        let qh = W[bb + 4u + i];
        q |= ((vec4<u32>(qh) >> (by + vec4<u32>(j))) & vec4<u32>(1u)) << vec4<u32>(4u);
      }
      return vec4<f32>(q);
    }
    default: { // Q6_K: 6-bit q from ql's nibbles and qh's bit pairs
      let bb = base + (u / 8u) * 52u;
      let c = u % 8u;
      let n = c / 4u;
      let k = c % 4u;
      let lo = (vec4<u32>(W[bb + 16u * n + 8u * (k & 1u) + i]) >> (by + vec4<u32>(4u * (k >> 1u)))) & vec4<u32>(15u);
      let hi = (vec4<u32>(W[bb + 32u + 8u * n + i]) >> (by + vec4<u32>(2u * k))) & vec4<u32>(3u);
      return vec4<f32>(vec4<i32>(lo | (hi << vec4<u32>(4u))) - vec4<i32>(32));
    }
  }
}

// qvals is elements 4i..4i+3 of unit u (elements 32u..32u+31, i < 8) of
// the block-format row at word base (QT, cols columns), dequantized
// exactly as ggml's reference dequantizer (tensor.Dequantize), with s =
// qscale(base, cols, u): Q4_K/Q5_K (d·scale)·q − dmin·min, Q6_K
// (d·scale)·q, the others q·d.
fn qvals(base: u32, cols: u32, u: u32, i: u32, s: vec4<f32>) -> vec4<f32> {
  let q = qints(base, cols, u, i);
  if (QT == 6u || QT == 7u) { return s.x * q - s.y; }
  if (QT == 8u) { return select(s.z, s.x, i < 4u) * q; }
  return q * s.x;
}

// qdot is unit u (elements 32u..32u+31) of the block-format row at word
// base (QT, cols columns) dotted with X[xb + 32u ..]: the quants times x
// summed, then scaled once (minus dmin·min·Σx for Q4_K/Q5_K), as ggml's
// dot products are — equal to the dot product of qvals' values within
// float32 rounding, with fewer operations per weight.
fn qdot(base: u32, cols: u32, u: u32, xb: u32) -> f32 {
  let s = qscale(base, cols, u);
  var a = vec4<f32>();
  var b = vec4<f32>();
  var sx = vec4<f32>();
  for (var i = 0u; i < 8u; i++) {
    let xv = x4(xb + 32u * u + 4u * i);
    let p = qints(base, cols, u, i) * xv;
    if (QT == 8u && i >= 4u) { b += p; } else { a += p; }
    if (QT == 6u || QT == 7u) { sx += xv; }
  }
  let one = vec4<f32>(1.0);
  var r = s.x * dot(a, one);
  if (QT == 8u) { r += s.z * dot(b, one); }
  if (QT == 6u || QT == 7u) { r -= s.y * dot(sx, one); }
  return r;
}

// row_dot is one lane's share of the dot product of the weight row at
// word base (cols columns of the including kernel's W, dtype p.dtype) with
// X[xb ..], lanes lanes striding over the row: 32-value units through
// qdot when q (a block-format module), else column pairs through wpair.
fn row_dot(base: u32, cols: u32, xb: u32, lane: u32, lanes: u32, q: bool) -> f32 {
  var acc = 0.0;
  if (q) {
    for (var u = lane; u < cols / 32u; u += lanes) { acc += qdot(base, cols, u, xb); }
    return acc;
  }
  for (var j = lane; j < (cols + 1u) / 2u; j += lanes) {
    let w = wpair(base, j);
    let c = 2u * j;
    acc += w.x * X[xb + c];
    if (c + 1u < cols) { acc += w.y * X[xb + c + 1u]; }
  }
  return acc;
}

// tree8 adds eight lanes' shares in the order an 8-lane workgroup
// reduction adds them (strides 4, 2, 1: the GEMV kernels' red1 loop), so
// a thread that computes all eight shares itself (the one-thread-per-row
// shape of a software adapter, Device.gemvLanes) gets the bits of eight
// threads. tree8v is the same for pairs of sums.
fn tree8(a: array<f32, 8>) -> f32 {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

fn tree8v(a: array<vec2<f32>, 8>) -> vec2<f32> {
  return ((a[0] + a[4]) + (a[2] + a[6])) + ((a[1] + a[5]) + (a[3] + a[7]));
}

// qel is element c of the block-format row at word base (QT, cols
// columns), as qvals.
fn qel(base: u32, cols: u32, c: u32) -> f32 {
  let u = c / 32u;
  let v = qvals(base, cols, u, (c % 32u) / 4u, qscale(base, cols, u));
  return v[c % 4u];
}

// x4 is X[i..i+3] of the including kernel's input X.
fn x4(i: u32) -> vec4<f32> {
  return vec4<f32>(X[i], X[i + 1u], X[i + 2u], X[i + 3u]);
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

// res_weights sets res_a[0..nsrc) to the softmax weights of one token's
// Block AttnRes read (ref.AttnRes) over the nsrc ≤ 64 sources of d values
// at the including kernel's X[tb + i·stride ..], pseudo-query w at
// E[wo ..] and key norm γ at EG[go ..]:
//   score_i = Σ_c (v_i[c] / sqrt(mean(v_i²) + eps)) γ[c] w[c]
//   res_a = softmax(score)
// Every invocation of the 64-wide workgroup calls it (tid: local index).
// Eight lanes take a source (eight sources per pass), so a pass costs a
// few barriers whatever d is: barriers are what a CPU driver pays for.
var<workgroup> res_a: array<f32, 64>;
var<workgroup> res_s: array<vec2<f32>, 64>;
fn res_weights(tb: u32, stride: u32, nsrc: u32, d: u32, wo: u32, go: u32, eps: f32, tid: u32) {
  let lane = tid % 8u;
  for (var i0 = 0u; i0 < nsrc; i0 += 8u) {
    let i = i0 + tid / 8u;
    var a = vec2<f32>(0.0, 0.0);
    if (i < nsrc) {
      let vb = tb + i * stride;
      for (var c = lane; c < d; c += 8u) {
        let x = X[vb + c];
        a += vec2<f32>(x * x, x * EG[go + c] * E[wo + c]);
      }
    }
    res_s[tid] = a;
    workgroupBarrier();
    for (var k = 4u; k > 0u; k >>= 1u) {
      if (lane < k) { res_s[tid] += res_s[tid + k]; }
      workgroupBarrier();
    }
    if (lane == 0u && i < nsrc) { res_a[i] = res_s[tid].y / sqrt(res_s[tid].x / f32(d) + eps); }
    workgroupBarrier();
  }
  var m = res_a[0];
  for (var i = 1u; i < nsrc; i++) { m = max(m, res_a[i]); }
  var sum = 0.0;
  for (var i = 0u; i < nsrc; i++) { sum += exp(res_a[i] - m); }
  workgroupBarrier();
  if (tid < nsrc) { res_a[tid] = exp(res_a[tid] - m) / sum; }
  workgroupBarrier();
}

// res_val is column c of the AttnRes read whose weights res_weights left
// in res_a: Σ_i res_a[i]·X[tb + i·stride + c].
fn res_val(tb: u32, stride: u32, nsrc: u32, c: u32) -> f32 {
  var a = 0.0;
  for (var i = 0u; i < nsrc; i++) { a += res_a[i] * X[tb + i * stride + c]; }
  return a;
}

// route_token is the MoE router (ref.Router.Route) of one token, run by a
// whole workgroup of WG invocations (tid: local index; call it from
// uniform control flow): scores s = sigmoid(l), or softmax(l) with flag 4,
// of the logits l = RL[lb .. lb+E) of the including kernel; selection
// values sel = s + RB[bb + e] (has_bias); with groups > topk_groups only
// the topk_groups groups with the best sum of their two best sel stay
// selectable (the rest masked to −3.4e38); the top K of sel (ties: lower
// id — expert e ranks by how many rank before it, so no serial passes)
// with weights s, renormalised (flag 1, for K > 1 or with flag 2:
// w /= Σw + 1e-20, summed in rank order) and scaled. On return rt_idx[k]
// and rt_w[k] (k < K) hold the ids and weights for every invocation.
// E ≤ 1024, groups ≤ 256, K ≤ 64.
var<workgroup> rt_s: array<f32, 1024>;
var<workgroup> rt_sel: array<f32, 1024>;
var<workgroup> rt_g: array<f32, 256>;
var<workgroup> rt_keep: array<u32, 256>;
var<workgroup> rt_idx: array<u32, 64>;
var<workgroup> rt_w: array<f32, 64>;
fn route_token(lb: u32, bb: u32, tid: u32, E: u32, K: u32, groups: u32, topk_groups: u32, flags: u32, has_bias: bool, scale: f32) {
  let neg = -3.4e38;
  let softmax = (flags & 4u) != 0u;
  var lmax = 0.0;
  var lsum = 1.0;
  if (softmax) {
    var mx = neg;
    for (var e = tid; e < E; e += WG) { mx = max(mx, RL[lb + e]); }
    lmax = reduce_max(mx, tid);
    var sm = 0.0;
    for (var e = tid; e < E; e += WG) { sm += exp(RL[lb + e] - lmax); }
    lsum = reduce_sum(sm, tid);
  }
  for (var e = tid; e < E; e += WG) {
    let l = RL[lb + e];
    var v = 1.0 / (1.0 + exp(-l));
    if (softmax) { v = exp(l - lmax) / lsum; }
    rt_s[e] = v;
    var b = 0.0;
    if (has_bias) { b = RB[bb + e]; }
    rt_sel[e] = v + b;
  }
  workgroupBarrier();
  if (groups > 1u && groups > topk_groups) {
    let per = E / groups;
    for (var gi = tid; gi < groups; gi += WG) { // group score: the sum of its two best
      var b1 = neg;
      var b2 = neg;
      for (var e = gi * per; e < (gi + 1u) * per; e++) {
        let v = rt_sel[e];
        if (v > b1) { b2 = b1; b1 = v; } else if (v > b2) { b2 = v; }
      }
      rt_g[gi] = b1 + b2;
    }
    workgroupBarrier();
    for (var gi = tid; gi < groups; gi += WG) { // kept: fewer than topk_groups rank before it
      var r = 0u;
      for (var o = 0u; o < groups; o++) {
        if (rt_g[o] > rt_g[gi] || (rt_g[o] == rt_g[gi] && o < gi)) { r++; }
      }
      rt_keep[gi] = select(0u, 1u, r < topk_groups);
    }
    workgroupBarrier();
    for (var e = tid; e < E; e += WG) {
      if (rt_keep[e / per] == 0u) { rt_sel[e] = neg; }
    }
    workgroupBarrier();
  }
  for (var e = tid; e < E; e += WG) {
    let v = rt_sel[e];
    var r = 0u;
    for (var o = 0u; o < E && r < K; o++) {
      let w = rt_sel[o];
      if (w > v || (w == v && o < e)) { r++; }
    }
    if (r < K) { rt_idx[r] = e; }
  }
  workgroupBarrier();
  if (tid < K) {
    var sum = 0.0;
    for (var k = 0u; k < K; k++) { sum += rt_s[rt_idx[k]]; }
    var w = rt_s[rt_idx[tid]];
    if ((flags & 1u) != 0u && (K > 1u || (flags & 2u) != 0u)) { w = w / (sum + 1e-20); }
    rt_w[tid] = w * scale;
  }
  workgroupBarrier();
}
