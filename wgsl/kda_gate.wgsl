// KDA log-decay gate (ref.KDAGate), one invocation per element of [T, H*dk]:
//   bounded:  g = lb * sigmoid(exp(A_log) * (raw + dt_bias))
//   softplus: g = -exp(A_log) * softplus(raw + dt_bias)
// A_log has H values (per_channel 0) or H*dk values (per_channel 1).
struct P {
  n: u32, hd: u32, dk: u32, per_channel: u32, bounded: u32, lb: f32,
  raw_off: u32, bias_off: u32, alog_off: u32, g_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> RAW: array<f32>;
@group(0) @binding(2) var<storage, read_write> BIAS: array<f32>;
@group(0) @binding(3) var<storage, read_write> ALOG: array<f32>;
@group(0) @binding(4) var<storage, read_write> G: array<f32>;

@compute @workgroup_size(256)
fn main(@builtin(global_invocation_id) gid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>) {
  let i = gid.x + gid.y * nwg.x * 256u;
  if (i >= p.n) { return; }
  let c = i % p.hd;
  var al: f32;
  if (p.per_channel == 1u) { al = ALOG[p.alog_off + c]; } else { al = ALOG[p.alog_off + c / p.dk]; }
  G[p.g_off + i] = kda_gate(RAW[p.raw_off + i], BIAS[p.bias_off + c], al, p.bounded == 1u, p.lb);
}
