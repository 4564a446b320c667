// Short causal depthwise conv + SiLU with carried state (ref.ShortConv).
// One invocation per channel c: channels are independent, so the same
// invocation also shifts its column of the state after the T outputs.
//   x [T, C], w [C, K], state [K-1, C] (oldest first), out [T, C]
struct P { T: u32, C: u32, K: u32, x_off: u32, w_off: u32, s_off: u32, o_off: u32 }
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Wt: array<f32>;
@group(0) @binding(3) var<storage, read_write> S: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;

// Element v of the virtual sequence [state; x] for channel c.
fn virt(v: u32, c: u32) -> f32 {
  let hist = p.K - 1u;
  if (v < hist) { return S[p.s_off + v * p.C + c]; }
  return X[p.x_off + (v - hist) * p.C + c];
}

@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let c = gid.x + gid.y * nwg.x * 64u;
  if (c >= p.C) { return; }
  let hist = p.K - 1u;
  for (var t = 0u; t < p.T; t++) {
    var s = 0.0;
    for (var j = 0u; j < p.K; j++) { s += Wt[p.w_off + c * p.K + j] * virt(t + j, c); }
    O[p.o_off + t * p.C + c] = s / (1.0 + exp(-s));
  }
  // New state row r = virtual element T + r; reads only indices > r, so the
  // in-place shift never reads an overwritten value.
  for (var r = 0u; r < hist; r++) {
    S[p.s_off + r * p.C + c] = virt(p.T + r, c);
  }
}
