// qkv_post.wgsl — everything between a layer's Q, K, V matmul and its attention, in one
// dispatch: qwen3's per-head RMSNorm of q and k (QK_NORM), RoPE of q (in place) and of k (into
// the key cache row pos + t: the key write), and the value write (into the value cache row
// pos + t), as forward_ref.c does them with ref_rmsnorm and ref_rope. (qwen2's biases are in
// already: the matmul adds them.)
// One workgroup per (head slot, token): slots 0 .. N_HEAD - 1 are q's heads, then N_HEAD_KV of
// k, then N_HEAD_KV of v; a token's row of qkv is q | k | v, so slot s's head starts at
// s * HEAD_DIM in it; qkv_post_head.wgsl does a slot's work, the head staged in workgroup
// memory. The norm is rmsnorm.wgsl's: each lane sums the squares of its strided elements in
// index order, the lanes' sums are added as a tree (reduce.wgsl), then x * scale * w. The rotation (NEOX: the pairs (i, i + HEAD_DIM / 2),
// else (2i, 2i + 1), by angle i of the position) computes no angle and no sin/cos: the table
// holds ref_rope_angles' own (ops.c, gpu_rope_table_create). GPU compilers may contract or
// reassociate a range reduction (NVIDIA's lost 1e-4 rad at angles ~4000), and WGSL's sin/cos
// promise only 2^-11 on [-pi, pi]; the host's bits are the reference's bits on every device.
// Constants: N_HEAD, N_HEAD_KV, HEAD_DIM, KV_DIM, QKV (N_HEAD * HEAD_DIM + 2 KV_DIM), NEOX,
// QK_NORM (0 / 1), EPS, NORM_VEC4 (vec4s in norms), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read_write> qkv: array<f32>; // (n_batch, QKV)
@group(0) @binding(2) var<storage, read_write> kc: array<f32>;  // (n_ctx, KV_DIM) key cache
@group(0) @binding(3) var<storage, read_write> vc: array<f32>;  // (n_ctx, KV_DIM) value cache
@group(0) @binding(4) var<storage, read> table: array<f32>;     // (n_ctx, HEAD_DIM): cos (HEAD_DIM / 2), then sin
// q_norm then k_norm (HEAD_DIM each) when QK_NORM is 1: a uniform, as the kernel's storage
// buffers are the 4 every adapter grants; unread otherwise (one vec4, any 16 bytes bound)
@group(0) @binding(5) var<uniform> norms: array<vec4<f32>, NORM_VEC4>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lid: u32) {
    let t = wid.y;
    post_head(wid.x, t * QKV + wid.x * HEAD_DIM, step.pos + t, 0u, lid);
}
