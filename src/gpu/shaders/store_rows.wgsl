// store_rows.wgsl — dst row (pos + t) = src row t, for the call's tokens: the KV write of the
// values (the keys are written by rope.wgsl). Invocation (i, t); workgroups (ceil(N / WG), n_tok).
// Constants: N (row width, elements), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> src: array<f32>;       // (n_batch, N)
@group(0) @binding(2) var<storage, read_write> dst: array<f32>; // (n_ctx, N)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= N) { return; }
    dst[(step.pos + gid.y) * N + gid.x] = src[gid.y * N + gid.x];
}
