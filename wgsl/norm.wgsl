// Row norms, one workgroup per row of n values.
//   rmsnorm: out = (x / sqrt(mean(x²) + eps)) * w * act(g), act by mode:
//            0 none, 1 sigmoid, 2 SiLU (ref.RMSNorm, ref.RMSNormGated)
//   l2norm:  out = x / sqrt(sum(x²) + eps) * scale          (ref.L2Norm)
// out may alias x (each thread rewrites only what it read).
struct P {
  n: u32, rows: u32, mode: u32, eps: f32, scale: f32,
  x_off: u32, x_stride: u32, g_off: u32, g_stride: u32,
  w_off: u32, o_off: u32, o_stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> G: array<f32>;
@group(0) @binding(3) var<storage, read_write> Wt: array<f32>;
@group(0) @binding(4) var<storage, read_write> O: array<f32>;

const WG: u32 = 64u;
var<workgroup> red: array<f32, 64>;

fn sumsq(xb: u32, tid: u32) -> f32 {
  var s = 0.0;
  for (var i = tid; i < p.n; i += WG) { let v = X[xb + i]; s += v * v; }
  red[tid] = s;
  workgroupBarrier();
  for (var k = WG / 2u; k > 0u; k >>= 1u) {
    if (tid < k) { red[tid] += red[tid + k]; }
    workgroupBarrier();
  }
  return red[0];
}

fn sigmoid(x: f32) -> f32 { return 1.0 / (1.0 + exp(-x)); }

@compute @workgroup_size(64)
fn rmsnorm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
           @builtin(local_invocation_index) tid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; }
  let xb = p.x_off + r * p.x_stride;
  let inv = 1.0 / sqrt(sumsq(xb, tid) / f32(p.n) + p.eps);
  let gb = p.g_off + r * p.g_stride;
  let ob = p.o_off + r * p.o_stride;
  for (var i = tid; i < p.n; i += WG) {
    var y = (X[xb + i] * inv) * Wt[p.w_off + i];
    if (p.mode == 1u) { y *= sigmoid(G[gb + i]); }
    if (p.mode == 2u) { let g = G[gb + i]; y *= sigmoid(g) * g; }
    O[ob + i] = y;
  }
}

@compute @workgroup_size(64)
fn l2norm(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
          @builtin(local_invocation_index) tid: u32) {
  let r = wid.x + wid.y * nwg.x;
  if (r >= p.rows) { return; }
  let xb = p.x_off + r * p.x_stride;
  let inv = 1.0 / sqrt(sumsq(xb, tid) + p.eps) * p.scale;
  let ob = p.o_off + r * p.o_stride;
  for (var i = tid; i < p.n; i += WG) { O[ob + i] = X[xb + i] * inv; }
}
