// Second pass of the chunked KDA prefill (kda_chunk.wgsl has the
// equations): one invocation per (head h, value column j), chunks
// [c0, c1) in order, each reading its block of the scratch X.
struct P {
  T: u32, H: u32, DK: u32, DV: u32, C: u32,
  // block layout (kdaChunkLayout): block size, then the offsets of W, KD,
  // U, A and EL in a block (QE at 0)
  bs: u32, r_w: u32, r_kd: u32, r_u: u32, r_a: u32, r_el: u32,
  x_off: u32, q_off: u32, k_off: u32, v_off: u32, g_off: u32, b_off: u32, o_off: u32, s_off: u32,
  c0: u32, c1: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> O: array<f32>;
@group(0) @binding(3) var<storage, read_write> S: array<f32>;

// Blk is the scratch words of chunk c, head h (kdaChunkLayout).
struct Blk { qe: u32, w: u32, kd: u32, u: u32, a: u32, el: u32 }

fn blk(c: u32, h: u32) -> Blk {
  let base = p.x_off + (c * p.H + h) * p.bs;
  return Blk(base, base + p.r_w, base + p.r_kd, base + p.r_u, base + p.r_a, base + p.r_el);
}

// DKMAX is the largest DK (kdaChunkDKMax in kda_chunk.go): the state
// column lives in private memory for the whole dispatch.
const DKMAX = 128u;
const CMAX = 32u;

@compute @workgroup_size(64)
fn inter(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) tid: u32) {
  let j = wid.x * 64u + tid;
  let h = wid.y;
  if (j >= p.DV || h >= p.H) { return; }
  let sb = p.s_off + h * p.DK * p.DV + j;
  var s: array<f32, DKMAX>;
  var vn: array<f32, CMAX>;
  for (var d = 0u; d < p.DK; d++) {
    s[d] = S[sb + d * p.DV];
  }
  for (var c = p.c0; c < p.c1; c++) {
    let t0 = c * p.C;
    let n = min(p.C, p.T - t0);
    let b = blk(c, h);
    for (var i = 0u; i < n; i++) {
      var v = 0.0;
      var o = 0.0;
      for (var d = 0u; d < p.DK; d++) {
        v += X[b.w + i * p.DK + d] * s[d];
        o += X[b.qe + i * p.DK + d] * s[d];
      }
      vn[i] = X[b.u + i * p.DV + j] - v;
      for (var m = 0u; m <= i; m++) {
        o += X[b.a + i * p.C + m] * vn[m];
      }
      O[p.o_off + ((t0 + i) * p.H + h) * p.DV + j] = o;
    }
    for (var d = 0u; d < p.DK; d++) {
      var a = s[d] * X[b.el + d];
      for (var m = 0u; m < n; m++) {
        a += X[b.kd + m * p.DK + d] * vn[m];
      }
      s[d] = a;
    }
  }
  for (var d = 0u; d < p.DK; d++) {
    S[sb + d * p.DV] = s[d];
  }
}
