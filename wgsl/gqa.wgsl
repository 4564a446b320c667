// Causal grouped-query softmax attention (ref.GQA) over a paged K/V cache
// whose rows are [k (HKV·D); v (HKV·D)] (row stride c_width). Query n
// (position pos0+n) of head h reads KV head h / (H/HKV) and sees cache rows
// s <= pos0+n. One workgroup per (n, h) folds one tile of at most 128 keys
// of one cache page (C is bound to that page, whose first row is cache row
// c_row0) into an online softmax: the running max and sum live in T at
// st_off, the unnormalised output in O; the first tile (k0 = 0) starts them,
// the last one normalises. Each key's score is a workgroup dot product over
// D (reduce_sum; WG from common.wgsl); every invocation's loops stay far
// below lavapipe's loop cap.
struct P {
  N: u32, H: u32, HKV: u32, D: u32, pos0: u32, scale: f32,
  q_off: u32, o_off: u32, c_width: u32, c_row0: u32, k0: u32, kn: u32, last: u32, st_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> Q: array<f32>;
@group(0) @binding(2) var<storage, read_write> C: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;
@group(0) @binding(4) var<storage, read_write> T: array<f32>;

const NEG: f32 = -3.0e38;

@compute @workgroup_size(WG)
fn attn(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let i = wid.x + wid.y * nwg.x;
  if (i >= p.N * p.H) { return; }
  let n = i / p.H;
  let h = i % p.H;
  let g = h / (p.H / p.HKV);
  let qb = p.q_off + i * p.D;
  let ob = p.o_off + i * p.D;
  let kb = g * p.D;
  let vb = p.HKV * p.D + g * p.D;
  let last_key = p.pos0 + n;
  var m = NEG;
  var l = 0.0;
  if (p.k0 == 0u) {
    for (var x = tid; x < p.D; x += WG) { O[ob + x] = 0.0; }
  } else {
    m = T[p.st_off + 2u * i];
    l = T[p.st_off + 2u * i + 1u];
  }
  var kn = 0u;
  if (p.k0 <= last_key) { kn = min(p.kn, last_key + 1u - p.k0); }
  for (var k = 0u; k < kn; k++) {
    let row = (p.k0 + k - p.c_row0) * p.c_width;
    var part = 0.0;
    for (var x = tid; x < p.D; x += WG) { part += Q[qb + x] * C[row + kb + x]; }
    let sc = reduce_sum(part, tid) * p.scale;
    var r = 1.0;
    if (sc > m) { r = exp(m - sc); l *= r; m = sc; }
    let pr = exp(sc - m);
    l += pr;
    for (var x = tid; x < p.D; x += WG) { O[ob + x] = O[ob + x] * r + pr * C[row + vb + x]; }
  }
  if (p.last == 1u) {
    let inv = 1.0 / l;
    for (var x = tid; x < p.D; x += WG) { O[ob + x] *= inv; }
  } else if (tid == 0u) {
    T[p.st_off + 2u * i] = m;
    T[p.st_off + 2u * i + 1u] = l;
  }
}
