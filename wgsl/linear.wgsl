// out[t, o] = sum_i x[t, i] * W[o, i]  (out = x·Wᵀ, W [rows=out, cols=in]),
// or out[t, o] += that (accum: a residual add fused into the projection).
// One workgroup per (output row, tile of up to TT tokens): the 64 threads
// stride over the row in column pairs (adjacent threads read adjacent words)
// and reduce in workgroup memory, so the weight row is read once per tile
// and no invocation loops more than cols/128·TT times (lavapipe's cap).
// W is always array<u32>: f32 bits, or two f16 / bf16 halves per word
// (decoded with unpack2x16float / shifts; no shader-f16 needed). The *_q
// entry points read ggml block formats as they are (p.dtype a block
// dtype, common.wgsl's qvals), 32 columns (one unit) at a time; the plain
// ones are the same kernels for f32 / f16 / bf16 (q false is a constant:
// each entry compiles to its own pipeline).
//
// Epilogue (gate 1): the KDA log-decay gate (ref.KDAGate, as kda_gate.wgsl)
// applied to each output before it is stored, so the gate's projection f_b
// and the gate are one dispatch: E holds dt_bias (one per output row, from
// bias_off) and A_log (per row or per head of dk rows, from alog_off);
// output row r is channel r0 + r of the gate.
struct P {
  rows: u32, cols: u32, T: u32, dtype: u32,   // dtype 0 f32, 1 f16, 2 bf16
  w_off: u32, w_stride: u32,                  // in words
  x_off: u32, x_stride: u32, o_off: u32, o_stride: u32,
  tiles: u32, accum: u32,                     // accum 1: out += x·Wᵀ
  gate: u32, r0: u32, dk: u32, per_channel: u32, bounded: u32, lb: f32, bias_off: u32, alog_off: u32,
  norm: u32, nu_off: u32, eps: f32,           // gemv only: x is RMSNorm'd (weight E[nu_off..]) on the fly
  g_off: u32, gdk: u32, gmode: u32,           // gemv_gnorm: gate G[g_off..], heads of gdk, act 1 σ / 2 SiLU / 3 GLU
  act: u32, beta: f32, beta_lin: f32,         // gemv_gnorm with gmode 3, gemv_pair: glu_act's
  cols2: u32, w2_off: u32, w2_stride: u32, u_off: u32, // gemv_pair: W2's columns and rows, u at G[u_off..]
  nsrc: u32, w_off2: u32, gm_off: u32, rn_off: u32, reps: f32, rneps: f32, xn_off: u32, // gemv_res
  blocks: u32,                                // gemv_res: RPW-row blocks per workgroup
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> W: array<u32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
@group(0) @binding(4) var<storage, read_write> E: array<f32>;
@group(0) @binding(5) var<storage, read_write> G: array<f32>;
@group(0) @binding(6) var<storage, read_write> EG: array<f32>; // gemv_res: γ
@group(0) @binding(7) var<storage, read_write> NV: array<f32>; // gemv_res: ν

// epi applies the epilogue (if any) to the value v of output row row.
fn epi(v: f32, row: u32) -> f32 {
  if (p.gate == 0u) { return v; }
  let c = p.r0 + row;
  var al: f32;
  if (p.per_channel == 1u) { al = E[p.alog_off + c]; } else { al = E[p.alog_off + c / p.dk]; }
  return kda_gate(v, E[p.bias_off + c], al, p.bounded == 1u, p.lb);
}

const TT: u32 = 8u;
var<workgroup> redt: array<f32, 512>; // TT*WG

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  gemm(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn main_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) tid: u32) {
  gemm(wid, nwg, tid, true);
}

fn gemm(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let g = wid.x + wid.y * nwg.x;
  if (g >= p.rows * p.tiles) { return; }
  let row = g % p.rows;
  let t0 = (g / p.rows) * TT;
  let nt = min(TT, p.T - t0);
  var acc = gemm_share(p.w_off + row * p.w_stride, t0, nt, tid, q);
  for (var t = 0u; t < TT; t++) { redt[t * WG + tid] = acc[t]; }
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (tid < s) {
      for (var t = 0u; t < TT; t++) { redt[t * WG + tid] += redt[t * WG + tid + s]; }
    }
    workgroupBarrier();
  }
  if (tid < nt) {
    let o = p.o_off + (t0 + tid) * p.o_stride + row;
    var v = redt[tid * WG];
    if (p.accum != 0u) { v += O[o]; }
    O[o] = epi(v, row);
  }
}

// gemm_share is lane's share (of the WG lanes striding over the row at word
// base in column pairs, or 32-column units) of the row's dot products with
// the tile's nt tokens from t0.
fn gemm_share(base: u32, t0: u32, nt: u32, lane: u32, q: bool) -> array<f32, 8> {
  var acc: array<f32, 8>;
  if (q) {
    for (var u = lane; u < p.cols / 32u; u += WG) {
      let sc = qscale(base, p.cols, u);
      for (var i = 0u; i < 8u; i++) {
        let w = qvals(base, p.cols, u, i, sc);
        let c = 32u * u + 4u * i;
        for (var t = 0u; t < nt; t++) { acc[t] += dot(w, x4(p.x_off + (t0 + t) * p.x_stride + c)); }
      }
    }
    return acc;
  }
  let npair = (p.cols + 1u) / 2u;
  for (var j = lane; j < npair; j += WG) {
    let w = wpair(base, j);
    let c = 2u * j;
    let two = c + 1u < p.cols;
    for (var t = 0u; t < nt; t++) {
      let xb = p.x_off + (t0 + t) * p.x_stride + c;
      var s = w.x * X[xb];
      if (two) { s += w.y * X[xb + 1u]; }
      acc[t] += s;
    }
  }
  return acc;
}

// main_rows is main in a software adapter's shape (Device.gemvLanes 1):
// one thread per output row and tile, 64 rows per workgroup, no barrier.
// The thread computes the WG lanes' shares itself and adds them in the
// workgroup reduction's order, so it gives main's bits.
@compute @workgroup_size(64)
fn main_rows(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
  gemm_rows(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn main_rows_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) tid: u32) {
  gemm_rows(wid, nwg, tid, true);
}

fn gemm_rows(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let nb = (p.rows + 63u) / 64u;
  let g = wid.x + wid.y * nwg.x;
  let row = (g % nb) * 64u + tid;
  if (g >= nb * p.tiles || row >= p.rows) { return; }
  let t0 = (g / nb) * TT;
  let nt = min(TT, p.T - t0);
  let base = p.w_off + row * p.w_stride;
  var part: array<array<f32, 8>, 64>; // [lane][token]
  for (var l = 0u; l < WG; l++) { part[l] = gemm_share(base, t0, nt, l, q); }
  for (var t = 0u; t < nt; t++) {
    var r: array<f32, 64>;
    for (var l = 0u; l < WG; l++) { r[l] = part[l][t]; }
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
      for (var i = 0u; i < s; i++) { r[i] += r[i + s]; }
    }
    let o = p.o_off + (t0 + t) * p.o_stride + row;
    var v = r[0];
    if (p.accum != 0u) { v += O[o]; }
    O[o] = epi(v, row);
  }
}

// gemv: the T = 1 case of main without the token tile: each workgroup
// computes RPW output rows, LANES threads per row striding over the row in
// column pairs, then a LANES-lane reduction in workgroup memory. LANES is
// the device's GEMV_LANES (Device.gemvLanes): 8 on a GPU (8 rows per
// workgroup), 1 on a software adapter (64 rows, one thread each, no
// barrier), where the thread computes the eight lanes' shares itself and
// adds them in the reduction's order (tree8): both shapes give the same
// bits. With norm 1 the
// input is RMSNorm'd on the fly (ref.RMSNorm, weight ν in E): each lane
// also sums x² over its columns, and the row's dot product Σ w·ν·x is
// scaled by 1/sqrt(mean(x²) + eps) — the norm and the projection in one
// dispatch.
const LANES: u32 = GEMV_LANES; // threads per row
const RPW: u32 = WG / LANES;   // rows per workgroup
var<workgroup> red1: array<f32, 64>;
var<workgroup> red2: array<f32, 64>;

@compute @workgroup_size(64)
fn gemv(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  gemv1(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn gemv_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) tid: u32) {
  gemv1(wid, nwg, tid, true);
}

fn gemv1(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let lane = tid % LANES;
  let row = (wid.x + wid.y * nwg.x) * RPW + tid / LANES;
  var v = vec2<f32>(0.0); // (Σ w·x, Σ x²) of the row
  if (row < p.rows) {
    if (LANES > 1u) {
      v = gemv_share(row, lane, LANES, q);
    } else {
      var s: array<vec2<f32>, 8>;
      for (var l = 0u; l < 8u; l++) { s[l] = gemv_share(row, l, 8u, q); }
      v = tree8v(s);
    }
  }
  if (LANES > 1u) {
    red1[tid] = v.x;
    red2[tid] = v.y;
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
      if (lane < s) { red1[tid] += red1[tid + s]; red2[tid] += red2[tid + s]; }
      workgroupBarrier();
    }
    v = vec2<f32>(red1[tid], red2[tid]);
  }
  if (lane == 0u && row < p.rows) {
    var r = v.x;
    if (p.norm == 1u) { r *= 1.0 / sqrt(v.y / f32(p.cols) + p.eps); }
    if (p.accum != 0u) { r += O[p.o_off + row]; }
    O[p.o_off + row] = epi(r, row);
  }
}

// gemv_share is lane's share, of lanes striding over the row in column
// pairs (or 32-column units), of row row's dot product with x and (with
// norm 1) of x's sum of squares.
fn gemv_share(row: u32, lane: u32, lanes: u32, q: bool) -> vec2<f32> {
  let base = p.w_off + row * p.w_stride;
  let npair = (p.cols + 1u) / 2u;
  var acc = 0.0;
  var ss = 0.0;
  if (q && p.norm == 1u) {
    for (var u = lane; u < p.cols / 32u; u += lanes) {
      let sc = qscale(base, p.cols, u);
      for (var i = 0u; i < 8u; i++) {
        let c = 32u * u + 4u * i;
        let xv = x4(p.x_off + c);
        acc += dot(qvals(base, p.cols, u, i, sc), xv * vec4<f32>(E[p.nu_off + c], E[p.nu_off + c + 1u], E[p.nu_off + c + 2u], E[p.nu_off + c + 3u]));
        ss += dot(xv, xv);
      }
    }
  } else if (q) {
    acc = row_dot(base, p.cols, p.x_off, lane, lanes, true);
  } else if (p.norm == 1u) {
    for (var j = lane; j < npair; j += lanes) {
      let w = wpair(base, j);
      let c = 2u * j;
      let x0 = X[p.x_off + c];
      var s = w.x * (x0 * E[p.nu_off + c]);
      var q = x0 * x0;
      if (c + 1u < p.cols) {
        let x1 = X[p.x_off + c + 1u];
        s += w.y * (x1 * E[p.nu_off + c + 1u]);
        q += x1 * x1;
      }
      acc += s;
      ss += q;
    }
  } else if (p.dtype == 0u && (p.cols & 1u) == 0u) {
    for (var j = lane; j < npair; j += lanes) {
      let c = 2u * j;
      acc += bitcast<f32>(W[base + c]) * X[p.x_off + c] + bitcast<f32>(W[base + c + 1u]) * X[p.x_off + c + 1u];
    }
  } else {
    acc = row_dot(base, p.cols, p.x_off, lane, lanes, false);
  }
  return vec2<f32>(acc, ss);
}

// gemv_gnorm: gemv of the gated RMSNorm of x (ref.RMSNormGated over heads of
// gdk values, weight ν = E[nu_off..][gdk], gate G): every workgroup first
// builds xs = RMSNorm(x_h)·ν·act(g) for all cols ≤ 2048 inputs in
// workgroup memory (one thread per head), then computes its RPW rows from
// xs as gemv does — the KDA output norm and o_proj in one dispatch. With
// norm 0 there is no norm: xs = x·act(g) (MLA's output gate and o_proj),
// or with gmode 3 xs = glu_act(g, x) (a GLU's activation of gate g and up
// x and its down projection: LinearGLU).
var<workgroup> xs: array<f32, 2048>;

fn gact(g: f32) -> f32 {
  let sg = 1.0 / (1.0 + exp(-g));
  if (p.gmode == 2u) { return g * sg; }
  return sg;
}

@compute @workgroup_size(64)
fn gemv_gnorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) tid: u32) {
  gemv_gn(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn gemv_gnorm_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) tid: u32) {
  gemv_gn(wid, nwg, tid, true);
}

fn gemv_gn(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let heads = select(0u, p.cols / p.gdk, p.norm == 1u);
  if (p.norm == 0u && p.gmode == 3u) {
    for (var i = tid; i < p.cols; i += WG) { xs[i] = glu_act(G[p.g_off + i], X[p.x_off + i], p.act, p.beta, p.beta_lin); }
  } else if (p.norm == 0u) {
    for (var i = tid; i < p.cols; i += WG) { xs[i] = X[p.x_off + i] * gact(G[p.g_off + i]); }
  }
  for (var h = tid; h < heads; h += WG) {
    let xb = p.x_off + h * p.gdk;
    var ss = 0.0;
    for (var i = 0u; i < p.gdk; i++) { let v = X[xb + i]; ss += v * v; }
    let inv = 1.0 / sqrt(ss / f32(p.gdk) + p.eps);
    for (var i = 0u; i < p.gdk; i++) {
      xs[h * p.gdk + i] = (X[xb + i] * inv) * E[p.nu_off + i] * gact(G[p.g_off + h * p.gdk + i]);
    }
  }
  workgroupBarrier();
  xs_rows(wid, nwg, tid, q);
}

// xs_rows computes the workgroup's RPW output rows from the input its
// workgroup memory xs holds (LANES threads per row, as gemv1), adding into
// O with accum.
fn xs_rows(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  xs_block(wid.x + wid.y * nwg.x, tid, q);
}

// xs_block is xs_rows for the RPW rows of block blk.
fn xs_block(blk: u32, tid: u32, q: bool) {
  let lane = tid % LANES;
  let row = blk * RPW + tid / LANES;
  var acc = 0.0;
  if (row < p.rows) {
    let base = p.w_off + row * p.w_stride;
    if (LANES > 1u) {
      acc = xs_dot(base, p.cols, 0u, lane, LANES, q);
    } else {
      var s: array<f32, 8>;
      for (var l = 0u; l < 8u; l++) { s[l] = xs_dot(base, p.cols, 0u, l, 8u, q); }
      acc = tree8(s);
    }
  }
  xs_store(acc, tid, row);
}

// xs_dot is one lane's share (of lanes) of the dot product of the weight
// row at word base (cols columns) with xs[x0 ..].
fn xs_dot(base: u32, cols: u32, x0: u32, lane: u32, lanes: u32, q: bool) -> f32 {
  var acc = 0.0;
  if (q) {
    for (var u = lane; u < cols / 32u; u += lanes) {
      let sc = qscale(base, cols, u);
      for (var i = 0u; i < 8u; i++) {
        let c = x0 + 32u * u + 4u * i;
        acc += dot(qvals(base, cols, u, i, sc), vec4<f32>(xs[c], xs[c + 1u], xs[c + 2u], xs[c + 3u]));
      }
    }
    return acc;
  }
  for (var j = lane; j < (cols + 1u) / 2u; j += lanes) {
    let c = 2u * j;
    var w = wpair(base, j);
    var s = w.x * xs[x0 + c];
    if (c + 1u < cols) {
      if (p.dtype == 0u) { w.y = bitcast<f32>(W[base + c + 1u]); } // wpair stops at p.cols, W2 may be wider
      s += w.y * xs[x0 + c + 1u];
    }
    acc += s;
  }
  return acc;
}

// xs_store sums the LANES shares acc of output row row and stores it
// (added to O with accum); with LANES 1, acc is the whole sum (tree8).
fn xs_store(acc: f32, tid: u32, row: u32) {
  let lane = tid % LANES;
  red1[tid] = acc;
  if (LANES > 1u) {
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
      if (lane < s) { red1[tid] += red1[tid + s]; }
      workgroupBarrier();
    }
  }
  if (lane == 0u && row < p.rows) {
    var v = red1[tid];
    if (p.accum != 0u) { v += O[p.o_off + row]; }
    O[p.o_off + row] = v;
  }
}

// gemv_res: a decoded token's Block AttnRes read and the RMSNorm after it
// (attnres.wgsl's math: common.wgsl's res_weights, res_val) as the
// prologue of the GEMV that reads it. Every workgroup builds
//   xs = ν ⊙ h / sqrt(mean(h²) + rneps),  h = Σ_i softmax(score)_i v_i
// for the cols ≤ 2048 values in its memory (sources X[x_off + i·x_stride ..],
// w E[w_off2 ..], γ EG[gm_off ..], ν NV[rn_off ..]), workgroup 0 also stores
// it at G[xn_off ..] for the block's other readers, and then computes its
// blocks·RPW rows from xs as gemv_gnorm does: the AttnRes and the projection
// in one dispatch. (On a CPU driver the runner gives each workgroup many
// blocks, so few workgroups repeat the read.)
@compute @workgroup_size(64)
fn gemv_res(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) tid: u32) {
  gemv_r(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn gemv_res_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
              @builtin(local_invocation_index) tid: u32) {
  gemv_r(wid, nwg, tid, true);
}

fn gemv_r(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  res_weights(p.x_off, p.x_stride, p.nsrc, p.cols, p.w_off2, p.gm_off, p.reps, tid);
  var ss = 0.0;
  for (var c = tid; c < p.cols; c += WG) {
    let a = res_val(p.x_off, p.x_stride, p.nsrc, c);
    xs[c] = a;
    ss += a * a;
  }
  let inv = 1.0 / sqrt(reduce_sum(ss, tid) / f32(p.cols) + p.rneps);
  let first = wid.x == 0u && wid.y == 0u;
  for (var c = tid; c < p.cols; c += WG) {
    let v = (xs[c] * inv) * NV[p.rn_off + c];
    xs[c] = v;
    if (first) { G[p.xn_off + c] = v; }
  }
  workgroupBarrier();
  let g = wid.x + wid.y * nwg.x;
  for (var b = 0u; b < p.blocks; b++) { xs_block(g * p.blocks + b, tid, q); }
}

// gemv_pair: out (+)= W·RMSNorm(x; ν) + W2·glu_act(g, u) for one token —
// LinearNormed and LinearGLU adding into one output, in one dispatch:
// every workgroup builds xs = [RMSNorm(x)·ν (cols values) ; glu_act(g, u)
// (cols2)] in workgroup memory (cols + cols2 ≤ 2048; x's sum of squares
// reduced over the workgroup, ν = E[nu_off..], g and u = G[g_off..],
// G[u_off..]), then each of its RPW rows is the sum of its two dot products;
// W2's row r is at w2_off + r·w2_stride of the same buffer as W (same
// dtype).
@compute @workgroup_size(64)
fn gemv_pair(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
             @builtin(local_invocation_index) tid: u32) {
  gemv_pr(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn gemv_pair_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
               @builtin(local_invocation_index) tid: u32) {
  gemv_pr(wid, nwg, tid, true);
}

fn gemv_pr(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  var ss = 0.0;
  for (var i = tid; i < p.cols; i += WG) { let v = X[p.x_off + i]; ss += v * v; }
  let inv = 1.0 / sqrt(reduce_sum(ss, tid) / f32(p.cols) + p.eps);
  for (var i = tid; i < p.cols; i += WG) { xs[i] = X[p.x_off + i] * inv * E[p.nu_off + i]; }
  for (var i = tid; i < p.cols2; i += WG) {
    xs[p.cols + i] = glu_act(G[p.g_off + i], G[p.u_off + i], p.act, p.beta, p.beta_lin);
  }
  workgroupBarrier(); // xs complete
  let lane = tid % LANES;
  let row = (wid.x + wid.y * nwg.x) * RPW + tid / LANES;
  var acc = 0.0;
  if (row < p.rows) {
    let b1 = p.w_off + row * p.w_stride;
    let b2 = p.w2_off + row * p.w2_stride;
    if (LANES > 1u) {
      acc = xs_dot(b1, p.cols, 0u, lane, LANES, q) + xs_dot(b2, p.cols2, p.cols, lane, LANES, q);
    } else {
      var s: array<f32, 8>;
      for (var l = 0u; l < 8u; l++) { s[l] = xs_dot(b1, p.cols, 0u, l, 8u, q) + xs_dot(b2, p.cols2, p.cols, l, 8u, q); }
      acc = tree8(s);
    }
  }
  xs_store(acc, tid, row);
}
