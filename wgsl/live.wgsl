// The live routing/state view's device side (live.go): nothing here runs
// unless a view is attached.
//
// route_copy: O[o_off + t·stride + j] = X[x_off + t·k + j] for the n = T·k
//   routed expert ids of a piece (u32), so each MoE layer's ids survive
//   the next layer's routing until the step is read back.
// sumsq: O[o_off + g] = Σ X[x_off + i]² (X as f32) over the per·WG
//   elements i of workgroup g below n (WG and reduce_sum: common.wgsl): one partial sum of squares per
//   workgroup, added up on the host (the Frobenius norm of a KDA state).
struct P { n: u32, per: u32, x_off: u32, o_off: u32, k: u32, stride: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<u32>;
@group(0) @binding(2) var<storage, read_write> O: array<u32>;

@compute @workgroup_size(64)
fn route_copy(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
              @builtin(local_invocation_index) tid: u32) {
  let i = (wg.y * nw.x + wg.x) * WG + tid;
  if (i >= p.n) { return; }
  let t = i / p.k;
  O[p.o_off + t * p.stride + (i - t * p.k)] = X[p.x_off + i];
}

@compute @workgroup_size(64)
fn sumsq(@builtin(workgroup_id) wg: vec3<u32>, @builtin(num_workgroups) nw: vec3<u32>,
         @builtin(local_invocation_index) tid: u32) {
  let g = wg.y * nw.x + wg.x;
  let base = g * WG * p.per;
  var s = 0.0;
  for (var j = 0u; j < p.per; j++) {
    let i = base + j * WG + tid;
    if (i < p.n) {
      let x = bitcast<f32>(X[p.x_off + i]);
      s += x * x;
    }
  }
  let total = reduce_sum(s, tid);
  if (tid == 0u) { O[p.o_off + g] = bitcast<u32>(total); }
}
