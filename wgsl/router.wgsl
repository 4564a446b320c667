// MoE router (ref.Router.Route): the sigmoid "noaux_tc" router, or the
// softmax top-k router; one workgroup of WG per token, the routing itself
// common.wgsl's route_token (E <= 1024 experts, groups <= 256, K <= 64).
// renorm holds its flags: 1 renormalise, 2 also for k = 1, 4 softmax.
// Only idx (u32) and w stay on the GPU; nothing is read back.
struct P {
  E: u32, K: u32, T: u32, groups: u32, topk_groups: u32, renorm: u32, has_bias: u32, scale: f32,
  l_off: u32, b_off: u32, i_off: u32, w_off: u32,
}
@group(0) @binding(0) var<uniform> p: P;
@group(0) @binding(1) var<storage, read_write> RL: array<f32>;
@group(0) @binding(2) var<storage, read_write> RB: array<f32>;
@group(0) @binding(3) var<storage, read_write> IDX: array<u32>;
@group(0) @binding(4) var<storage, read_write> WOUT: array<f32>;

@compute @workgroup_size(64)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(num_workgroups) nwg: vec3<u32>,
        @builtin(local_invocation_index) tid: u32) {
  let t = wid.x + wid.y * nwg.x;
  if (t >= p.T) { return; }
  route_token(p.l_off + t * p.E, p.b_off, tid, p.E, p.K, p.groups, p.topk_groups, p.renorm, p.has_bias == 1u, p.scale);
  if (tid < p.K) {
    IDX[p.i_off + t * p.K + tid] = rt_idx[tid];
    WOUT[p.w_off + t * p.K + tid] = rt_w[tid];
  }
}
