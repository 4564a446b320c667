// Elementwise ops over rows×n elements with per-operand row strides, one
// invocation per element.
//   glu: out = act(x) * y with x the gate and y the up half (ref.Act.GLU):
//        mode 0 SiLU-GLU; mode 1 SiTU-GLU, β = beta, β_lin = beta_lin
//        (0: up uncapped); mode 2 out = σ(x) * y (output gates);
//        mode 3 out = σ(x) (y ignored; KDA β)
//   add: out = x + a * y   (residual add with a = 1, axpy y += a·x with
//        out = x = y's view and y = x's view)
struct P {
  n: u32, rows: u32, mode: u32, a: f32, beta: f32, beta_lin: f32,
  x_off: u32, x_stride: u32, y_off: u32, y_stride: u32, o_off: u32, o_stride: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<storage, read_write> O: array<f32>;

@compute @workgroup_size(256)
fn glu(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n * p.rows) { return; }
  let r = i / p.n;
  let c = i % p.n;
  let g = X[p.x_off + r * p.x_stride + c];
  let u = Y[p.y_off + r * p.y_stride + c];
  var h: f32;
  if (p.mode == 2u) {
    h = u / (1.0 + exp(-g));
  } else if (p.mode == 3u) {
    h = 1.0 / (1.0 + exp(-g));
  } else {
    h = glu_act(g, u, p.mode, p.beta, p.beta_lin);
  }
  O[p.o_off + r * p.o_stride + c] = h;
}

@compute @workgroup_size(256)
fn add(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n * p.rows) { return; }
  let r = i / p.n;
  let c = i % p.n;
  O[p.o_off + r * p.o_stride + c] = X[p.x_off + r * p.x_stride + c] + p.a * Y[p.y_off + r * p.y_stride + c];
}

// copy: out = x (strided rows; e.g. appending rows to a latent cache).
@compute @workgroup_size(256)
fn copy(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n * p.rows) { return; }
  let r = i / p.n;
  let c = i % p.n;
  O[p.o_off + r * p.o_stride + c] = X[p.x_off + r * p.x_stride + c];
}
