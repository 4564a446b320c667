// Sampling on the GPU: out[0] = the token generate.Sampler picks (without
// a repetition penalty) from the n logits at x, given its uniform draw u.
//
// The CPU sampler sorts the candidates by (logit desc, id asc), keeps the
// top k, applies softmax, min-p and top-p, and walks the sorted list until
// the cumulative weight exceeds u·total. Sorting a whole vocabulary in one
// workgroup is costly, so this kernel finds the same elements by searching
// the order instead of materialising it. Each scaled logit s = x/T maps to
// an order-preserving u32 key (NaN → 0, never a candidate):
//   - top-k: an 8-bit radix select finds the k-th largest key tk; of the
//     elements whose key equals tk only the lowest ids are kept (bisection
//     on the id), exactly k in all, as the CPU's selectTop;
//   - weights w = exp(s − max) of the candidates go to scratch W; min-p
//     zeroes those below min_p (w of the top token is 1);
//   - top-p keeps the shortest prefix, in the order above, whose weight
//     reaches top_p · Σ(top-k weights); sampling takes the first element
//     whose cumulative weight exceeds u · Σ(kept weights). Both are "first
//     element in the order where the running sum crosses a goal": a
//     bisection over the key finds its level (the largest key K whose
//     weight of keys ≥ K crosses), a second one over ids splits ties.
// Every loop has a trip count fixed by the uniforms, so each barrier sits
// in uniform control flow; the searched values are the same in every
// invocation (read from workgroup memory after a barrier).
struct P {
  n: u32, x_off: u32, o_off: u32, w_off: u32,
  topk: u32, temp: f32, topp: f32, minp: f32,
  u: f32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<u32>;
@group(0) @binding(3) var<storage, read_write> W: array<f32>;

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> ru: array<u32, 256>;
var<workgroup> rf: array<f32, 256>;
var<workgroup> hist: array<atomic<u32>, 256>;
var<workgroup> best: atomic<u32>;
var<workgroup> res: u32;

fn key(i: u32) -> u32 {
  let s = X[p.x_off + i] / p.temp;
  if (s != s) { return 0u; }
  let b = bitcast<u32>(s);
  if ((b & 0x80000000u) != 0u) { return ~b; }
  return b | 0x80000000u;
}

fn unkey(k: u32) -> f32 {
  if ((k & 0x80000000u) != 0u) { return bitcast<f32>(k & 0x7fffffffu); }
  return bitcast<f32>(~k);
}

// Workgroup reductions: every invocation passes its partial and gets the
// total; the trailing barrier lets the next reduction reuse the array.
fn sum_u(tid: u32, v: u32) -> u32 {
  ru[tid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (tid < s) { ru[tid] += ru[tid + s]; }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&ru[0]);
  workgroupBarrier();
  return r;
}

fn max_u(tid: u32, v: u32) -> u32 {
  ru[tid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (tid < s) { ru[tid] = max(ru[tid], ru[tid + s]); }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&ru[0]);
  workgroupBarrier();
  return r;
}

fn sum_f(tid: u32, v: f32) -> f32 {
  rf[tid] = v;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (tid < s) { rf[tid] += rf[tid + s]; }
    workgroupBarrier();
  }
  let r = workgroupUniformLoad(&rf[0]);
  workgroupBarrier();
  return r;
}

// mass: Σ w over elements with key ≥ lo (and, when id_lt < NONE, key == lo
// and id < id_lt).
fn mass(tid: u32, lo: u32, id_lt: u32) -> f32 {
  var acc = 0.0;
  for (var i = tid; i < p.n; i += WG) {
    let k = key(i);
    var hit = k >= lo;
    if (id_lt != NONE) { hit = k == lo && i < id_lt; }
    if (hit) { acc += W[p.w_off + i]; }
  }
  return sum_f(tid, acc);
}

fn crosses(m: f32, goal: f32, inclusive: bool) -> bool {
  if (inclusive) { return m >= goal; }
  return m > goal;
}

// first finds the first element, in (key desc, id asc) order over the
// weights in W, whose running sum crosses goal (≥ when inclusive, > if
// not): returns (key, id). Returns (0, NONE) when the total does not cross.
fn first(tid: u32, goal: f32, inclusive: bool, idbits: u32) -> vec2<u32> {
  var k = 0u;
  for (var b = 0u; b < 32u; b++) {
    let c = k | (0x80000000u >> b);
    if (crosses(mass(tid, c, NONE), goal, inclusive)) { k = c; }
  }
  if (!crosses(mass(tid, k, NONE), goal, inclusive)) {
    return vec2<u32>(0u, NONE);
  }
  var above = 0.0;
  if (k != NONE) { above = mass(tid, k + 1u, NONE); }
  // ties at level k: the largest id bound whose prefix does not cross yet
  var cnt = 0u;
  for (var i = tid; i < p.n; i += WG) {
    if (key(i) == k && W[p.w_off + i] > 0.0) { cnt += 1u; }
  }
  var lo = 0u;
  if (sum_u(tid, cnt) > 1u) {
    for (var b = 0u; b < idbits; b++) {
      let c = lo | ((1u << (idbits - 1u)) >> b);
      if (!crosses(above + mass(tid, k, c), goal, inclusive)) { lo = c; }
    }
  }
  // the element: the lowest id ≥ lo at level k with weight
  atomicStore(&best, NONE);
  workgroupBarrier();
  for (var i = tid; i < p.n; i += WG) {
    if (i >= lo && key(i) == k && W[p.w_off + i] > 0.0) { atomicMin(&best, i); }
  }
  workgroupBarrier();
  if (tid == 0u) { res = atomicLoad(&best); }
  let r = workgroupUniformLoad(&res);
  workgroupBarrier();
  return vec2<u32>(k, r);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32) {
  let n = p.n;
  var idbits = 1u;
  if (n > 1u) { idbits = 32u - countLeadingZeros(n - 1u); }
  var mk = 0u;
  var nv = 0u;
  for (var i = tid; i < n; i += WG) {
    let k = key(i);
    mk = max(mk, k);
    if (k != 0u) { nv += 1u; }
  }
  let kmax = max_u(tid, mk);
  let valid = sum_u(tid, nv);

  // top-k: candidates are key > tk, or key == tk and id ≤ ik
  var tk = 1u;
  var ik = NONE;
  if (p.topk > 0u && p.topk < valid) {
    var prefix = 0u;
    var want = p.topk;
    for (var rp = 0u; rp < 4u; rp++) {
      let shift = 24u - 8u * rp;
      var hmask = 0u;
      if (rp > 0u) { hmask = 0xffffffffu << (shift + 8u); }
      atomicStore(&hist[tid], 0u);
      workgroupBarrier();
      for (var i = tid; i < n; i += WG) {
        let k = key(i);
        if (k != 0u && (k & hmask) == prefix) { atomicAdd(&hist[(k >> shift) & 0xffu], 1u); }
      }
      workgroupBarrier();
      if (tid == 0u) {
        var cum = 0u;
        var dg = 0u;
        for (var b = 0u; b < 256u; b++) {
          let c = atomicLoad(&hist[255u - b]);
          if (cum + c >= want) { dg = 255u - b; break; }
          cum += c;
        }
        ru[0] = prefix | (dg << shift);
        ru[1] = want - cum;
      }
      prefix = workgroupUniformLoad(&ru[0]);
      want = workgroupUniformLoad(&ru[1]);
      workgroupBarrier();
    }
    tk = prefix;
    var eq = 0u;
    for (var i = tid; i < n; i += WG) {
      if (key(i) == tk) { eq += 1u; }
    }
    if (sum_u(tid, eq) > want) {
      // the want-th lowest id at level tk: largest bound with fewer below it
      var lo = 0u;
      for (var b = 0u; b < idbits; b++) {
        let c = lo | ((1u << (idbits - 1u)) >> b);
        var below = 0u;
        for (var i = tid; i < n; i += WG) {
          if (i < c && key(i) == tk) { below += 1u; }
        }
        if (sum_u(tid, below) < want) { lo = c; }
      }
      ik = lo;
    }
  }

  // weights of the top-k candidates, Σ before min-p (as the CPU's top-p)
  let m = unkey(kmax);
  var acc = 0.0;
  for (var i = tid; i < n; i += WG) {
    let k = key(i);
    var w = 0.0;
    if (k != 0u && (k > tk || (k == tk && i <= ik))) {
      w = exp(X[p.x_off + i] / p.temp - m);
      acc += w;
      if (w < p.minp) { w = 0.0; }
    }
    W[p.w_off + i] = w;
  }
  let sum = sum_f(tid, acc);
  storageBarrier();

  if (p.topp > 0.0 && p.topp < 1.0) {
    let cut = first(tid, p.topp * sum, true, idbits);
    if (cut.y != NONE) {
      for (var i = tid; i < n; i += WG) {
        let k = key(i);
        if (k < cut.x || (k == cut.x && i > cut.y)) { W[p.w_off + i] = 0.0; }
      }
    }
    storageBarrier();
  }

  var tot = 0.0;
  for (var i = tid; i < n; i += WG) { tot += W[p.w_off + i]; }
  let total = sum_f(tid, tot);
  let pick = first(tid, p.u * total, false, idbits);
  var r = pick.y;
  if (r == NONE) {
    // u·total rounded up to the total: the last element in the order
    var kmin = NONE;
    for (var i = tid; i < n; i += WG) {
      if (W[p.w_off + i] > 0.0) { kmin = min(kmin, key(i)); }
    }
    ru[tid] = kmin;
    workgroupBarrier();
    for (var s = WG / 2u; s > 0u; s >>= 1u) {
      if (tid < s) { ru[tid] = min(ru[tid], ru[tid + s]); }
      workgroupBarrier();
    }
    let kl = ru[0];
    workgroupBarrier();
    atomicStore(&best, 0u);
    workgroupBarrier();
    for (var i = tid; i < n; i += WG) {
      if (key(i) == kl && W[p.w_off + i] > 0.0) { atomicMax(&best, i); }
    }
    workgroupBarrier();
    r = atomicLoad(&best);
  }
  if (tid == 0u) {
    if (r == NONE || valid == 0u) { r = 0u; }
    O[p.o_off] = r;
  }
}
