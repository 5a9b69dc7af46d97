// swiglu.wgsl — gate <- silu(gate) * up, silu(g) = g / (1 + e^-g) (ops_ref.c's ref_swiglu).
// Invocation (i, t): element i of token t; workgroups (ceil(N / WG), n_tok).
// Constants: N (n_ff), WG.
@group(0) @binding(0) var<storage, read_write> gate: array<f32>; // (n_batch, N)
@group(0) @binding(1) var<storage, read> up: array<f32>;         // (n_batch, N)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= N) { return; }
    let k = gid.y * N + gid.x;
    let g = gate[k];
    gate[k] = g / (1.0 + exp(-g)) * up[k];
}
