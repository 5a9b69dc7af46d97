// qkv_post.wgsl — everything between a layer's Q, K, V matmul and its attention in a prefill,
// in one dispatch: each head of q and k made ready (qk_head.wgsl: qwen3's norm, RoPE) — q in
// place, k into the key cache row pos + t (the key write) — and the value write (into the
// value cache row pos + t). (qwen2's biases are in already: the matmul adds them. Decode needs
// no qkv_post: attention.wgsl readies its heads itself.)
// One workgroup per (head slot, token): slots 0 .. N_HEAD - 1 are q's heads, then N_HEAD_KV of
// k, then N_HEAD_KV of v; a token's row of qkv is q | k | v, so slot s's head starts at
// s * HEAD_DIM in it.
// Constants: N_HEAD, N_HEAD_KV, HEAD_DIM, KV_DIM, QKV (N_HEAD * HEAD_DIM + 2 KV_DIM), and
// qk_head.wgsl's.
@group(0) @binding(0) var<uniform> step: Step;
// (n_batch, QKV), then the RoPE table from TABLE_OFF (qk_head.wgsl)
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>;
@group(0) @binding(2) var<storage, read_write> kc: array<f32>;  // (n_ctx, KV_DIM) key cache
@group(0) @binding(3) var<storage, read_write> vc: array<f32>;  // (n_ctx, KV_DIM) value cache
// q_norm then k_norm when QK_NORM is 1: a uniform, as the kernel's storage buffers are kept to
// the 4 every adapter grants; unread otherwise (one vec4, any 16 bytes bound)
@group(0) @binding(4) var<uniform> norms: array<vec4<f32>, NORM_VEC4>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let slot = wid.x; // uniform over the workgroup: every branch on it below is too
    let t = wid.y;
    let row = step.pos + t;
    let src = t * QKV + slot * HEAD_DIM;
    if (slot >= N_HEAD + N_HEAD_KV) { // a value head: the value write
        let d = row * KV_DIM + (slot - N_HEAD - N_HEAD_KV) * HEAD_DIM;
        for (var i = lid; i < HEAD_DIM; i += WG) { vc[d + i] = qkv[src + i]; }
        return;
    }
    let is_k = slot >= N_HEAD;
    head_ready(src, select(0u, 1u, is_k), row, lid);
    if (is_k) {
        let d = row * KV_DIM + (slot - N_HEAD) * HEAD_DIM;
        for (var i = lid; i < HEAD_DIM; i += WG) { kc[d + i] = hv[i]; }
    } else {
        for (var i = lid; i < HEAD_DIM; i += WG) { qkv[src + i] = hv[i]; }
    }
}
