// qk_head.wgsl — one head of a token's q or k made ready for attention, as forward_ref.c does
// it with ref_rmsnorm and ref_rope: qwen3's per-head RMSNorm (QK_NORM), then RoPE at a
// position. qkv_post.wgsl does it for every head of a prefill; attention.wgsl for its own query
// head and the token's key in decode, so a decode step has no qkv_post dispatch.
// The norm is rmsnorm.wgsl's arithmetic over the head: each lane sums the squares of its strided
// elements in index order, the lanes' sums are added across the workgroup (reduce.wgsl or
// reduce_sg.wgsl), then x * scale * w. The rotation (NEOX: the pairs (i, i + HEAD_DIM / 2),
// else (2i, 2i + 1), by angle i of the position) computes no angle and no sin/cos: the table
// holds ref_rope_angles' own (ops.c, gpu_qkv_buf_create). GPU compilers may contract or
// reassociate a range reduction (NVIDIA's lost 1e-4 rad at angles ~4000), and WGSL's sin/cos
// promise only 2^-11 on [-pi, pi]; the host's bits are the reference's bits on every device.
// The kernel that includes this declares qkv (storage: the call's rows of q | k | v, then from
// TABLE_OFF the table, (n_ctx, HEAD_DIM): cos (HEAD_DIM / 2), then sin) and norms (uniform:
// q_norm then k_norm, HEAD_DIM each, read only when QK_NORM is 1).
// Constants: HEAD_DIM, NEOX, QK_NORM (0 / 1), EPS, NORM_VEC4 (vec4s in norms), TABLE_OFF, WG.

var<workgroup> hv: array<f32, HEAD_DIM>; // the head being made ready

fn norm_weight(k: u32, i: u32) -> f32 {
    let j = k * HEAD_DIM + i;
    return norms[j / 4u][j % 4u];
}

// hv = the head at qkv[src ..], normed by weight k (0: q_norm, 1: k_norm) and rotated by the
// angles of position row. Contains barriers: every invocation calls it, in uniform control
// flow; hv is complete for all of them on return.
fn head_ready(src: u32, k: u32, row: u32, lid: u32) {
    for (var i = lid; i < HEAD_DIM; i += WG) { hv[i] = qkv[src + i]; }
    if (QK_NORM == 1u) {
        var ss = 0.0;
        for (var i = lid; i < HEAD_DIM; i += WG) { ss += hv[i] * hv[i]; } // the lane's own elements
        ss = wg_sum(ss, lid);
        let scale = 1.0 / sqrt(ss / f32(HEAD_DIM) + EPS);
        for (var i = lid; i < HEAD_DIM; i += WG) { hv[i] = hv[i] * scale * norm_weight(k, i); }
    }
    workgroupBarrier(); // the rotation reads other lanes' elements
    let half = HEAD_DIM / 2u;
    let tab = TABLE_OFF + row * HEAD_DIM;
    for (var i = lid; i < half; i += WG) { // pair i is this lane's alone: rotated in place
        let c = qkv[tab + i];
        let sn = qkv[tab + half + i];
        var i0 = 2u * i;
        var i1 = 2u * i + 1u;
        if (NEOX == 1u) {
            i0 = i;
            i1 = i + half;
        }
        let a = hv[i0];
        let b = hv[i1];
        hv[i0] = a * c - b * sn;
        hv[i1] = a * sn + b * c;
    }
    workgroupBarrier();
}
