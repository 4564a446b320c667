// MoE router (ref.Router.Route): the sigmoid "noaux_tc" router, or the
// softmax top-k router (flag 4); one workgroup of 256 per token; E <= 1024
// experts, groups <= 256:
//   s = sigmoid(logits) (or softmax(logits)); sel = s + bias (selection only)
//   group-limited: keep the topk_groups groups with the best sum of their
//   two best sel, mask the rest to -inf
//   idx = top-k of sel (ties: lower expert id), w = s[idx],
//   renormalise (k > 1, or any k with flag 2) w /= Σw + 1e-20, w *= scale
// renorm holds the flags: 1 renormalise, 2 also for k = 1, 4 softmax.
// Only idx (u32) and w stay on the GPU; nothing is read back.
struct P {
  E: u32, K: u32, T: u32, groups: u32, topk_groups: u32, renorm: u32, has_bias: u32, scale: f32,
  l_off: u32, b_off: u32, i_off: u32, w_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> L: array<f32>;
@group(0) @binding(2) var<storage, read_write> B: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDX: array<u32>;
@group(0) @binding(4) var<storage, read_write> WOUT: array<f32>;

const WG: u32 = 256u;
const NEG: f32 = -3.4e38;
var<workgroup> s: array<f32, 1024>;
var<workgroup> sel: array<f32, 1024>;
var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;
var<workgroup> keep: array<u32, 256>;
var<workgroup> taken: array<u32, 1024>;
const NONE: u32 = 0xffffffffu;

// better reports whether (v, i) ranks before (w, j): higher value, then lower id.
fn better(v: f32, i: u32, w: f32, j: u32) -> bool {
  return v > w || (v == w && i < j);
}

@compute @workgroup_size(256)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.T) { return; }
  let lb = p.l_off + t * p.E;
  let softmax = (p.renorm & 4u) != 0u;
  var lmax = NEG;
  var lsum = 0.0;
  if (softmax) { // the max and the sum of exp over all E logits
    var mx = NEG;
    for (var e = tid; e < p.E; e += WG) { mx = max(mx, L[lb + e]); }
    bv[tid] = mx;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st >>= 1u) {
      if (tid < st) { bv[tid] = max(bv[tid], bv[tid + st]); }
      workgroupBarrier();
    }
    lmax = bv[0];
    workgroupBarrier();
    var sm = 0.0;
    for (var e = tid; e < p.E; e += WG) { sm += exp(L[lb + e] - lmax); }
    bv[tid] = sm;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st >>= 1u) {
      if (tid < st) { bv[tid] += bv[tid + st]; }
      workgroupBarrier();
    }
    lsum = bv[0];
    workgroupBarrier();
  }
  for (var e = tid; e < p.E; e += WG) {
    var v = 1.0 / (1.0 + exp(-L[lb + e]));
    if (softmax) { v = exp(L[lb + e] - lmax) / lsum; }
    s[e] = v;
    var b = 0.0;
    if (p.has_bias == 1u) { b = B[p.b_off + e]; }
    sel[e] = v + b;
    taken[e] = 0u;
  }
  workgroupBarrier();
  if (p.groups > 1u && p.groups > p.topk_groups) {
    let per = p.E / p.groups;
    if (tid < p.groups) { // group score: sum of its two best
      var b1 = NEG;
      var b2 = NEG;
      for (var e = tid * per; e < (tid + 1u) * per; e++) {
        let v = sel[e];
        if (v > b1) { b2 = b1; b1 = v; } else if (v > b2) { b2 = v; }
      }
      bv[tid] = b1 + b2;
      keep[tid] = 0u;
    }
    workgroupBarrier();
    if (tid == 0u) {
      for (var i = 0u; i < p.topk_groups; i++) {
        var best = 0xffffffffu;
        for (var g = 0u; g < p.groups; g++) {
          if (keep[g] == 0u && (best == 0xffffffffu || bv[g] > bv[best])) { best = g; }
        }
        keep[best] = 1u;
      }
    }
    workgroupBarrier();
    for (var e = tid; e < p.E; e += WG) {
      if (keep[e / per] == 0u) { sel[e] = NEG; }
    }
    workgroupBarrier();
  }
  var sum = 0.0;
  for (var k = 0u; k < p.K; k++) {
    var v = NEG;
    var vi = NONE;
    for (var e = tid; e < p.E; e += WG) {
      if (taken[e] == 0u && (vi == NONE || better(sel[e], e, v, vi))) { v = sel[e]; vi = e; }
    }
    bv[tid] = v;
    bi[tid] = vi;
    workgroupBarrier();
    for (var st = WG / 2u; st > 0u; st >>= 1u) {
      if (tid < st) {
        let oi = bi[tid + st];
        if (oi != NONE && (bi[tid] == NONE || better(bv[tid + st], oi, bv[tid], bi[tid]))) {
          bv[tid] = bv[tid + st];
          bi[tid] = oi;
        }
      }
      workgroupBarrier();
    }
    let best = bi[0];
    sum += s[best];
    workgroupBarrier(); // everyone has read bi[0] before it is reused
    if (tid == 0u) {
      IDX[p.i_off + t * p.K + k] = best;
      WOUT[p.w_off + t * p.K + k] = s[best];
      taken[best] = 1u;
    }
    workgroupBarrier();
  }
  if (tid == 0u) {
    for (var k = 0u; k < p.K; k++) {
      let i = p.w_off + t * p.K + k;
      var w = WOUT[i];
      if ((p.renorm & 1u) != 0u && (p.K > 1u || (p.renorm & 2u) != 0u)) { w = w / (sum + 1e-20); }
      WOUT[i] = w * p.scale;
    }
  }
}
