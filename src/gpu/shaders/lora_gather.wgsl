// lora_gather.wgsl — t = A[id] for the embedding's LoRA (gpu/lora.c), the twin of ops_ref.c's
// ref_lora_embed: t[tok, r] = A[ids[tok], r], the terms' A (n_vocab, rank_j) side by side (R
// columns); lora_up then adds B' t to the token's embedding row, as after lora_down.
// Invocation (r, tok); workgroups (ceil(R / WG), n_tok).
// Constants: WG, R (the terms' ranks summed).
@group(0) @binding(0) var<storage, read> A: array<f32>;       // (n_vocab, R)
@group(0) @binding(1) var<storage, read> ids: array<u32>;     // (n_tok)
@group(0) @binding(2) var<storage, read_write> T: array<f32>; // (n_tok, R)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let r = gid.x;
    if (r >= R) { return; }
    let tok = gid.y;
    T[tok * R + r] = A[ids[tok] * R + r];
}
