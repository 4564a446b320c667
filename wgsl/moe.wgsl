// GLU feed-forward blocks whose weights may be chosen per row by expert ids
// that the router wrote on the GPU (nothing is read back).
//
// Each expert (or a dense MLP, E = 1) is stored as one block of e_words
// words: the gate rows [I, cols], then the up rows [I, cols] (both w_stride
// words per row), and, in a second buffer, the down rows [out, I].
//
//   gateup: h[tk, j] = act(gate_e[j]·x[t], up_e[j]·x[t]) for every
//           (token t, slot k), tk = t·K + k, e = IDX[tk] (use_idx) or 0;
//           one workgroup per (tk, 8 rows j), 8 threads per row.
//   down:   o[t, r] = (accum ? o[t, r] : 0) + Σ_k w_tk · down_e[r]·h[tk]
//           with w_tk = WT[tk] (use_idx) or 1; one workgroup per (t, 8 rows
//           r), 8 threads per row, the K slots summed in slot order.
//   gateup_route: gateup with the router inside: one workgroup per (t, 8
//           rows j) over all K slots; every workgroup routes its token
//           itself (common.wgsl's route_token: logits RL [T, E] from l_off,
//           bias RB from b_off); the token's first workgroup writes the ids
//           and weights to IDX and WT for down (and the route hooks): the
//           router and the gate/up projections in one dispatch.
// act: 0 SiLU-GLU, 1 SiTU-GLU (β = beta, β_lin = beta_lin, 0: up uncapped).
// The *_q entries are the same for weights in a ggml block format
// (common.wgsl's qvals; their own pipelines).
struct P {
  rows: u32, cols: u32, T: u32, K: u32, dtype: u32,
  w_off: u32, w_stride: u32, e_words: u32,
  x_off: u32, x_stride: u32, o_off: u32, o_stride: u32,
  i_off: u32, wt_off: u32, use_idx: u32, act: u32, beta: f32, beta_lin: f32, accum: u32,
  E: u32, groups: u32, topk_groups: u32, flags: u32, has_bias: u32, scale: f32, l_off: u32, b_off: u32, // gateup_route
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> W: array<u32>;
@group(0) @binding(2) var<storage, read_write> X: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDX: array<u32>;
@group(0) @binding(4) var<storage, read_write> WT: array<f32>;
@group(0) @binding(5) var<storage, read_write> O: array<f32>;
@group(0) @binding(6) var<storage, read_write> RL: array<f32>;
@group(0) @binding(7) var<storage, read_write> RB: array<f32>;

const LANES: u32 = GEMV_LANES; // threads per row (Device.gemvLanes: 8 on a GPU, 1 on a software adapter)
const RPW: u32 = 64u / LANES;  // rows per workgroup (64 threads)
var<workgroup> ra: array<f32, 64>;
var<workgroup> rb: array<f32, 64>;


fn expert(tk: u32) -> u32 {
  if (p.use_idx == 1u) { return IDX[p.i_off + tk]; }
  return 0u;
}

@compute @workgroup_size(64)
fn gateup(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) tid: u32) {
  let g = wid.x + wid.y * nwg.x;
  if (g < gateup_groups()) { gate_up(g, tid, expert(g / gateup_blocks()), false); }
}

@compute @workgroup_size(64)
fn gateup_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
            @builtin(local_invocation_index) tid: u32) {
  let g = wid.x + wid.y * nwg.x;
  if (g < gateup_groups()) { gate_up(g, tid, expert(g / gateup_blocks()), true); }
}

@compute @workgroup_size(64)
fn gateup_route(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                @builtin(local_invocation_index) tid: u32) {
  gate_up_routed(wid.x + wid.y * nwg.x, tid, false);
}

@compute @workgroup_size(64)
fn gateup_route_q(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
                  @builtin(local_invocation_index) tid: u32) {
  gate_up_routed(wid.x + wid.y * nwg.x, tid, true);
}

// gateup_blocks is the workgroups of one (token, slot): RPW rows each.
fn gateup_blocks() -> u32 { return (p.rows + RPW - 1u) / RPW; }

// gateup_groups is the workgroups of a gateup dispatch.
fn gateup_groups() -> u32 { return gateup_blocks() * p.T * p.K; }

// gate_up_routed is workgroup g's 8 rows of h for every slot of its token
// (one workgroup per (token, 8 rows): the routing, which every workgroup
// computes, is paid once per K slots), routed by the workgroup
// (route_token); the token's first workgroup stores the routing.
fn gate_up_routed(g: u32, tid: u32, q: bool) {
  let nb = gateup_blocks();
  if (g >= nb * p.T) { return; }
  let t = g / nb;
  route_token(p.l_off + t * p.E, p.b_off, tid, p.E, p.K, p.groups, p.topk_groups, p.flags, p.has_bias == 1u, p.scale);
  if (g % nb == 0u && tid < p.K) {
    IDX[p.i_off + t * p.K + tid] = rt_idx[tid];
    WT[p.wt_off + t * p.K + tid] = rt_w[tid];
  }
  for (var k = 0u; k < p.K; k++) { gate_up((t * p.K + k) * nb + g % nb, tid, workgroupUniformLoad(&rt_idx[k]), q); }
}

// gate_up is workgroup g's 8 rows of h for expert e.
fn gate_up(g: u32, tid: u32, e: u32, q: bool) {
  let nb = gateup_blocks();
  let lane = tid % LANES;
  let j = (g % nb) * RPW + tid / LANES;
  let tk = g / nb;
  let t = tk / p.K;
  var a = 0.0;
  var b = 0.0;
  if (j < p.rows) {
    let base = p.w_off + e * p.e_words + j * p.w_stride;
    let xb = p.x_off + t * p.x_stride;
    if (LANES > 1u) {
      a = row_dot(base, p.cols, xb, lane, LANES, q);
      b = row_dot(base + p.rows * p.w_stride, p.cols, xb, lane, LANES, q);
    } else { // the eight GPU lanes' shares, summed in their order (tree8)
      var sa: array<f32, 8>;
      var sb: array<f32, 8>;
      for (var l = 0u; l < 8u; l++) {
        sa[l] = row_dot(base, p.cols, xb, l, 8u, q);
        sb[l] = row_dot(base + p.rows * p.w_stride, p.cols, xb, l, 8u, q);
      }
      a = tree8(sa);
      b = tree8(sb);
    }
  }
  ra[tid] = a;
  rb[tid] = b;
  if (LANES > 1u) {
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
      if (lane < s) {
        ra[tid] += ra[tid + s];
        rb[tid] += rb[tid + s];
      }
      workgroupBarrier();
    }
  }
  if (lane == 0u && j < p.rows) {
    let gv = ra[tid];
    O[p.o_off + tk * p.o_stride + j] = glu_act(gv, rb[tid], p.act, p.beta, p.beta_lin);
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

// down_share is lane's share (of lanes) of token t's output row r:
// Σ_k w_k · (down_e row r) · h[t·K+k].
fn down_share(t: u32, r: u32, lane: u32, lanes: u32, q: bool) -> f32 {
  var acc = 0.0;
  for (var k = 0u; k < p.K; k++) {
    let tk = t * p.K + k;
    var wk = 1.0;
    if (p.use_idx == 1u) { wk = WT[p.wt_off + tk]; }
    let base = p.w_off + expert(tk) * p.e_words + r * p.w_stride;
    acc += wk * row_dot(base, p.cols, p.x_off + tk * p.x_stride, lane, lanes, q);
  }
  return acc;
}

fn down1(wid: vec3<u32>, nwg: vec3<u32>, tid: u32, q: bool) {
  let nb = (p.rows + RPW - 1u) / RPW;
  let g = wid.x + wid.y * nwg.x;
  if (g >= nb * p.T) { return; }
  let lane = tid % LANES;
  let r = (g % nb) * RPW + tid / LANES;
  let t = g / nb;
  var acc = 0.0;
  if (r < p.rows) {
    if (LANES > 1u) {
      acc = down_share(t, r, lane, LANES, q);
    } else { // the eight GPU lanes' shares, summed in their order (tree8)
      var s: array<f32, 8>;
      for (var l = 0u; l < 8u; l++) { s[l] = down_share(t, r, l, 8u, q); }
      acc = tree8(s);
    }
  }
  ra[tid] = acc;
  if (LANES > 1u) {
    workgroupBarrier();
    for (var s = LANES / 2u; s > 0u; s >>= 1u) {
      if (lane < s) { ra[tid] += ra[tid + s]; }
      workgroupBarrier();
    }
  }
  if (lane == 0u && r < p.rows) {
    let o = p.o_off + t * p.o_stride + r;
    var v = ra[tid];
    if (p.accum == 1u) { v += O[o]; }
    O[o] = v;
  }
}
