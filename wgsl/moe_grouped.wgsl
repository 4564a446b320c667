// Routed experts for a multi-token piece, grouped by expert (prefill): the
// per-(token, slot) kernels of moe.wgsl read a selected expert's weights
// once per token; these read each expert's weight rows once per tile of up
// to 8 of its tokens. Nothing is read back: the grouping is done on the GPU.
//
//   group:   one invocation sorts the T·K slots tk = t·K + k by expert id
//            (counting sort, stable in tk): ORD[0..E] = offsets, ORD[E+1+i]
//            = the i-th slot in expert order.
//   gateup:  h[tk, j] = act(gate_e[j]·x[t], up_e[j]·x[t]); one workgroup
//            per (expert e, 8 rows j), 8 threads per row, over e's slots in
//            tiles of 8.
//   down:    y[tk, r] = w_tk · down_e[r]·h[tk]; one workgroup per (expert,
//            8 rows r), tiles of 8 slots.
//   combine: o[t, r] = (accum ? o[t, r] : 0) + Σ_k y[t·K + k, r], in slot
//            order (as moe.wgsl's down).
// Weights as in moe.wgsl: expert e's gate rows [I, cols] then up rows at
// w_off + e·e_words, down rows [out, I] in their own buffer; gateup_q and
// down_q read them in a ggml block format (common.wgsl's qvals).
struct P {
  rows: u32, cols: u32, T: u32, K: u32, E: u32, dtype: u32,
  w_off: u32, w_stride: u32, e_words: u32,
  x_off: u32, x_stride: u32, o_off: u32, o_stride: u32,
  i_off: u32, wt_off: u32, ord_off: u32, act: u32, beta: f32, beta_lin: f32, accum: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> W: array<u32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDX: array<u32>;
@group(0) @binding(4) var<storage, read_write> WT: array<f32>;
@group(0) @binding(5) var<storage, read_write> ORD: array<u32>;
@group(0) @binding(6) var<storage, read_write> O: array<f32>;

const RPW: u32 = 8u;   // rows per workgroup
const LANES: u32 = 8u; // threads per row
const TT: u32 = 8u;    // slots per tile
var<workgroup> red: array<f32, 512>; // [TT][64]
var<workgroup> red2: array<f32, 512>;
var<workgroup> span: vec2<u32>; // this workgroup's expert: first slot, count

@compute @workgroup_size(1)
fn group() {
  let n = p.T * p.K;
  let ob = p.ord_off;
  for (var e = 0u; e <= p.E; e++) { ORD[ob + e] = 0u; }
  for (var tk = 0u; tk < n; tk++) {
    let e = min(IDX[p.i_off + tk], p.E - 1u);
    ORD[ob + e + 1u] += 1u;
  }
  for (var e = 0u; e < p.E; e++) { ORD[ob + e + 1u] += ORD[ob + e]; }
  // place, using ORD[e] as the fill cursor, then shift the offsets back
  for (var tk = 0u; tk < n; tk++) {
    let e = min(IDX[p.i_off + tk], p.E - 1u);
    ORD[ob + p.E + 1u + ORD[ob + e]] = tk;
    ORD[ob + e] += 1u;
  }
  for (var e = p.E; e > 0u; e--) { ORD[ob + e] = ORD[ob + e - 1u]; }
  ORD[ob] = 0u;
}

// rows_of fills xb[0..nt) with the word offsets of the X rows of the tile's
// slots (starting at slot index s0 in expert order): by token (t = tk / K)
// for gate/up, by slot for down.
fn rows_of(s0: u32, nt: u32, by_token: bool, xb: ptr<function, array<u32, 8>>) {
  for (var t = 0u; t < nt; t++) {
    let tk = ORD[p.ord_off + p.E + 1u + s0 + t];
    var row = tk;
    if (by_token) { row = tk / p.K; }
    (*xb)[t] = p.x_off + row * p.x_stride;
  }
}

// tile_dot2 accumulates, for this lane, the dot products of rows ba and bb
// (bb = ba: one row) with the tile's X rows: weights are read once per
// tile, X once per pair of rows (q: weights in a block format, 32 columns
// per unit).
fn tile_dot2(ba: u32, bb: u32, two_rows: bool, nt: u32, lane: u32, xb: ptr<function, array<u32, 8>>,
             a: ptr<function, array<f32, 8>>, b: ptr<function, array<f32, 8>>, q: bool) {
  if (q) {
    for (var u = lane; u < p.cols / 32u; u += LANES) {
      let sa = qscale(ba, p.cols, u);
      var sb = vec4<f32>();
      if (two_rows) { sb = qscale(bb, p.cols, u); }
      for (var i = 0u; i < 8u; i++) {
        let wa = qvals(ba, p.cols, u, i, sa);
        var wb = vec4<f32>();
        if (two_rows) { wb = qvals(bb, p.cols, u, i, sb); }
        let c = 32u * u + 4u * i;
        for (var t = 0u; t < TT; t++) {
          if (t < nt) {
            let xv = x4((*xb)[t] + c);
            (*a)[t] += dot(wa, xv);
            if (two_rows) { (*b)[t] += dot(wb, xv); }
          }
        }
      }
    }
    return;
  }
  let npair = (p.cols + 1u) / 2u;
  for (var j = lane; j < npair; j += LANES) {
    let c = 2u * j;
    let wa = wpair(ba, j);
    var wb = vec2<f32>(0.0, 0.0);
    if (two_rows) { wb = wpair(bb, j); }
    let two = c + 1u < p.cols;
    // a constant trip count lets compilers unroll the tile and keep a, b
    // and xb in registers
    for (var t = 0u; t < TT; t++) {
      if (t < nt) {
        let i = (*xb)[t] + c;
        var xv = vec2<f32>(X[i], 0.0);
        if (two) { xv.y = X[i + 1u]; }
        (*a)[t] += dot(wa, xv);
        if (two_rows) { (*b)[t] += dot(wb, xv); }
      }
    }
  }
}

@compute @workgroup_size(64)
fn gateup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) tid: u32) {
  gate_up(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn gateup_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) tid: u32) {
  gate_up(wid, nwg, tid, true);
}

fn gate_up(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let nb = (p.rows + RPW - 1u) / RPW;
  let g = wid.x + wid.y * nwg.x;
  if (g >= nb * p.E) { return; }
  let e = g / nb;
  let lane = tid % LANES;
  let slot = tid / LANES;
  let j = (g % nb) * RPW + slot;
  if (tid == 0u) { span = vec2<u32>(ORD[p.ord_off + e], ORD[p.ord_off + e + 1u] - ORD[p.ord_off + e]); }
  let sp = workgroupUniformLoad(&span); // uniform: the tile loop holds barriers
  let first = sp.x;
  let count = sp.y;
  let ntiles = (count + TT - 1u) / TT;
  for (var ti = 0u; ti < ntiles; ti++) {
    let s0 = first + ti * TT;
    let nt = min(TT, count - ti * TT);
    // explicit initialisers: naga declares locals once per function, so a
    // bare `var a: array<f32, 8>;` in a loop would keep the last tile's sums
    var a = array<f32, 8>();
    var b = array<f32, 8>();
    if (j < p.rows) {
      let base = p.w_off + e * p.e_words + j * p.w_stride;
      var xb = array<u32, 8>();
      rows_of(s0, nt, true, &xb);
      tile_dot2(base, base + p.rows * p.w_stride, true, nt, lane, &xb, &a, &b, q);
    }
    for (var t = 0u; t < TT; t++) {
      red[t * 64u + tid] = a[t];
      red2[t * 64u + tid] = b[t];
    }
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
      if (lane < s) {
        for (var t = 0u; t < TT; t++) {
          red[t * 64u + tid] += red[t * 64u + tid + s];
          red2[t * 64u + tid] += red2[t * 64u + tid + s];
        }
      }
      workgroupBarrier();
    }
    if (lane < nt && j < p.rows) {
      // lane t writes slot t of this row
      let gv = red[lane * 64u + slot * LANES];
      let h = glu_act(gv, red2[lane * 64u + slot * LANES], p.act, p.beta, p.beta_lin);
      let tk = ORD[p.ord_off + p.E + 1u + s0 + lane];
      O[p.o_off + tk * p.o_stride + j] = h;
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(64)
fn down(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  down1(wid, nwg, tid, false);
}

@compute @workgroup_size(64)
fn down_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) tid: u32) {
  down1(wid, nwg, tid, true);
}

fn down1(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let nb = (p.rows + RPW - 1u) / RPW;
  let g = wid.x + wid.y * nwg.x;
  if (g >= nb * p.E) { return; }
  let e = g / nb;
  let lane = tid % LANES;
  let slot = tid / LANES;
  let r = (g % nb) * RPW + slot;
  if (tid == 0u) { span = vec2<u32>(ORD[p.ord_off + e], ORD[p.ord_off + e + 1u] - ORD[p.ord_off + e]); }
  let sp = workgroupUniformLoad(&span); // uniform: the tile loop holds barriers
  let first = sp.x;
  let count = sp.y;
  let ntiles = (count + TT - 1u) / TT;
  for (var ti = 0u; ti < ntiles; ti++) {
    let s0 = first + ti * TT;
    let nt = min(TT, count - ti * TT);
    var a = array<f32, 8>(); // explicit initialiser (see gateup)
    if (r < p.rows) {
      let base = p.w_off + e * p.e_words + r * p.w_stride;
      var xb = array<u32, 8>();
      var unused = array<f32, 8>();
      rows_of(s0, nt, false, &xb);
      tile_dot2(base, base, false, nt, lane, &xb, &a, &unused, q);
    }
    for (var t = 0u; t < TT; t++) { red[t * 64u + tid] = a[t]; }
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
      if (lane < s) {
        for (var t = 0u; t < TT; t++) { red[t * 64u + tid] += red[t * 64u + tid + s]; }
      }
      workgroupBarrier();
    }
    if (lane < nt && r < p.rows) {
      let tk = ORD[p.ord_off + p.E + 1u + s0 + lane];
      O[p.o_off + tk * p.o_stride + r] = WT[p.wt_off + tk] * red[lane * 64u + slot * LANES];
    }
    workgroupBarrier();
  }
}

@compute @workgroup_size(256)
fn combine(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.T * p.rows) { return; }
  let t = i / p.rows;
  let r = i % p.rows;
  var v = 0.0;
  for (var k = 0u; k < p.K; k++) { v += X[p.x_off + (t * p.K + k) * p.x_stride + r]; }
  let o = p.o_off + t * p.o_stride + r;
  if (p.accum == 1u) { v += O[o]; }
  O[o] = v;
}
