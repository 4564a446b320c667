// Embedding gather (tensor.Mat.Row for each token id): out[t, c] =
// table[ids[t], c] for a table of f32, f16 / bf16 packed two per u32
// (element 2j in the low half), or a ggml block format (common.wgsl's qel). One invocation per output element; ids
// outside the table give a zero row (the host validates ids first). A table
// split over bindings is gathered part by part: this part holds rows
// [row0, row0 + V) of total (total 0: the table is whole); ids outside it
// are left to the other parts, and the first part (row0 = 0) writes the
// zero rows of ids ≥ total.
struct P {
  n: u32, T: u32, dtype: u32, V: u32,
  w_off: u32, w_stride: u32, t_off: u32, o_off: u32, o_stride: u32,
  row0: u32, total: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> W: array<u32>;
@group(0) @binding(2) var<storage, read_write> TOK: array<u32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n * p.T) { return; }
  let t = i / p.n;
  let c = i % p.n;
  let id = TOK[p.t_off + t] - p.row0;
  if (p.total > 0u && id >= p.V && !(p.row0 == 0u && id >= p.total)) { return; }
  var v = 0.0;
  if (id < p.V) {
    let base = p.w_off + id * p.w_stride;
    if (p.dtype == 0u) {
      v = bitcast<f32>(W[base + c]);
    } else if (p.dtype > 2u) {
      v = qel(base, p.n, c);
    } else {
      let w = W[base + c / 2u];
      if (p.dtype == 1u) {
        let h = unpack2x16float(w);
        v = select(h.x, h.y, (c & 1u) == 1u);
      } else {
        v = select(bitcast<f32>(w << 16u), bitcast<f32>(w & 0xffff0000u), (c & 1u) == 1u);
      }
    }
  }
  O[p.o_off + t * p.o_stride + c] = v;
}
