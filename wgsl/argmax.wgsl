// Greedy sampling on the GPU: out[0] = the index of the largest of n
// logits (the first one on ties, as generate.Argmax; NaNs never win).
// One workgroup of 256; each thread scans a strided slice, then a tree
// reduction keeps (value, lowest index).
struct P { n: u32, x_off: u32, o_off: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<u32>;

const WG: u32 = 256u;
const NONE: u32 = 0xffffffffu;
var<workgroup> bv: array<f32, 256>;
var<workgroup> bi: array<u32, 256>;

fn better(v: f32, i: u32, w: f32, j: u32) -> bool {
  return j == NONE || v > w || (v == w && i < j);
}

@compute @workgroup_size(256)
fn main(@builtin(local_invocation_index) tid: u32) {
  var v = 0.0;
  var vi = NONE;
  for (var i = tid; i < p.n; i += WG) {
    let x = X[p.x_off + i];
    if (x == x && better(x, i, v, vi)) { v = x; vi = i; }
  }
  bv[tid] = v;
  bi[tid] = vi;
  workgroupBarrier();
  for (var s = WG / 2u; s > 0u; s >>= 1u) {
    if (tid < s) {
      let oi = bi[tid + s];
      if (oi != NONE && better(bv[tid + s], oi, bv[tid], bi[tid])) {
        bv[tid] = bv[tid + s];
        bi[tid] = oi;
      }
    }
    workgroupBarrier();
  }
  if (tid == 0u) {
    var r = bi[0];
    if (r == NONE) { r = 0u; }
    O[p.o_off] = r;
  }
}
