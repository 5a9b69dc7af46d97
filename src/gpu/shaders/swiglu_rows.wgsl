// swiglu_rows.wgsl — gate <- silu(g) * u from rows g | u (gpu/lora.c: a stacked [Wgate; Wup]
// computed without its SwiGLU epilogue, so that LoRA terms are added to g and u first);
// swiglu.wgsl's arithmetic (ops_ref.c's ref_swiglu) on another layout.
// Invocation (i, t): element i of token t; workgroups (ceil(N / WG), n_tok). Constants: N, WG.
@group(0) @binding(0) var<storage, read> gu: array<f32>;         // (n_batch, 2 N): g | u per token
@group(0) @binding(1) var<storage, read_write> gate: array<f32>; // (n_batch, N)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    if (gid.x >= N) { return; }
    let g = gu[gid.y * 2u * N + gid.x];
    gate[gid.y * N + gid.x] = g / (1.0 + exp(-g)) * gu[gid.y * 2u * N + N + gid.x];
}
