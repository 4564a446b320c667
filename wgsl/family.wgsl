// Ops of the qwen3_next and deepseek_v3 families.
//
// repeat (ref.RepeatHeads): out row t = each group of d values of x row t
//   repeated r times in place; one invocation per output value.
// rope (ref.RoPE.Apply): rotates, in place, the first 2·half channels of
//   `heads` heads (stride values apart, the first at column off) of each row
//   t of X by position pos0+t. The angles come from TAB, the host's float64
//   cos/sin table [position, half, 2] (already × the YaRN attention factor),
//   so no angle is formed in f32 at any context length. Pairs are (j,
//   j+half) (rotate-half) or (2j, 2j+1) (interleaved); one invocation per
//   (t, head, pair).
struct P {
  T: u32, n: u32, d: u32, r: u32,
  x_off: u32, x_stride: u32, o_off: u32, o_stride: u32,
  heads: u32, hstride: u32, off: u32, half: u32, inter: u32, pos0: u32, tab_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;

fn flat(gid: vec3<u32>, nwg: vec3<u32>) -> u32 { return gid.x + gid.y * nwg.x * 64u; }

@compute @workgroup_size(64)
fn repeat(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg); // over T rows of n·r outputs
  let w = p.n * p.r;
  if (i >= p.T * w) { return; }
  let t = i / w;
  let c = i % w;
  let grp = c / (p.d * p.r);
  let k = c % p.d;
  O[p.o_off + t * p.o_stride + c] = X[p.x_off + t * p.x_stride + grp * p.d + k];
}

@compute @workgroup_size(64)
fn rope(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = flat(gid, nwg);
  let per = p.heads * p.half;
  if (i >= p.T * per) { return; }
  let t = i / per;
  let h = (i % per) / p.half;
  let j = i % p.half;
  let base = p.x_off + t * p.x_stride + p.off + h * p.hstride;
  var ia = base + j;
  var ib = base + j + p.half;
  if (p.inter == 1u) { ia = base + 2u * j; ib = ia + 1u; }
  let tb = p.tab_off + ((p.pos0 + t) * p.half + j) * 2u;
  let c = O[tb];
  let s = O[tb + 1u];
  let a = X[ia];
  let b = X[ib];
  X[ia] = a * c - b * s;
  X[ib] = b * c + a * s;
}
