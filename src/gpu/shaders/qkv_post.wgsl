// qkv_post.wgsl — everything between a layer's Q, K, V matmul and its attention, in one
// dispatch: qwen3's per-head RMSNorm of q and k (QK_NORM), RoPE of q (in place) and of k (into
// the key cache row pos + t: the key write), and the value write (into the value cache row
// pos + t), as forward_ref.c does them with ref_rmsnorm and ref_rope. (qwen2's biases are in
// already: the matmul adds them.)
// One workgroup per (head slot, token): slots 0 .. N_HEAD - 1 are q's heads, then N_HEAD_KV of
// k, then N_HEAD_KV of v; a token's row of qkv is q | k | v, so slot s's head starts at
// s * HEAD_DIM in it. The head is staged in workgroup memory. The norm is rmsnorm.wgsl's: each
// lane sums the squares of its strided elements in index order, the lanes' sums are added as a
// tree (reduce.wgsl), then x * scale * w. The rotation (NEOX: the pairs (i, i + HEAD_DIM / 2),
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

var<workgroup> hv: array<f32, HEAD_DIM>; // the head

fn norm_weight(k: u32, i: u32) -> f32 {
    let j = k * HEAD_DIM + i;
    return norms[j / 4u][j % 4u];
}

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
    for (var i = lid; i < HEAD_DIM; i += WG) { hv[i] = qkv[src + i]; }
    if (QK_NORM == 1u) {
        var ss = 0.0;
        for (var i = lid; i < HEAD_DIM; i += WG) { ss += hv[i] * hv[i]; } // the lane's own elements
        ss = wg_sum(ss, lid);
        let scale = 1.0 / sqrt(ss / f32(HEAD_DIM) + EPS);
        for (var i = lid; i < HEAD_DIM; i += WG) { hv[i] = hv[i] * scale * norm_weight(select(0u, 1u, is_k), i); }
    }
    workgroupBarrier(); // the rotation reads other lanes' elements
    let half = HEAD_DIM / 2u;
    var d = src; // q: in place
    if (is_k) { d = row * KV_DIM + (slot - N_HEAD) * HEAD_DIM; }
    for (var i = lid; i < half; i += WG) {
        let c = table[row * HEAD_DIM + i];
        let sn = table[row * HEAD_DIM + half + i];
        var i0 = 2u * i;
        var i1 = 2u * i + 1u;
        if (NEOX == 1u) {
            i0 = i;
            i1 = i + half;
        }
        let a = hv[i0];
        let b = hv[i1];
        if (is_k) {
            kc[d + i0] = a * c - b * sn;
            kc[d + i1] = a * sn + b * c;
        } else {
            qkv[d + i0] = a * c - b * sn;
            qkv[d + i1] = a * sn + b * c;
        }
    }
}
