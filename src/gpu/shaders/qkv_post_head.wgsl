// qkv_post_head.wgsl — the work of qkv_post.wgsl on one head slot of one token, shared by
// decode's and prefill's kernel (qkv_post.wgsl) and the batched pass's (qkv_post_rows.wgsl), so
// a row's bits are the same through either. Reads the including kernel's qkv, kc, vc, table and
// norms bindings; constants as qkv_post.wgsl's.
var<workgroup> hv: array<f32, HEAD_DIM>; // the head

fn norm_weight(k: u32, i: u32) -> f32 {
    let j = k * HEAD_DIM + i;
    return norms[j / 4u][j % 4u];
}

// One head slot of one token (see qkv_post.wgsl): src, the head's first float in qkv; pos, the
// token's position (its RoPE table row); base, the first float of its sequence's caches kc, vc.
// Every invocation of the workgroup calls it (a reduction inside), slot uniform over it.
fn post_head(slot: u32, src: u32, pos: u32, base: u32, lid: u32) {
    if (slot >= N_HEAD + N_HEAD_KV) { // a value head: the value write
        let d = base + pos * KV_DIM + (slot - N_HEAD - N_HEAD_KV) * HEAD_DIM;
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
    if (is_k) { d = base + pos * KV_DIM + (slot - N_HEAD) * HEAD_DIM; }
    for (var i = lid; i < half; i += WG) {
        let c = table[pos * HEAD_DIM + i];
        let sn = table[pos * HEAD_DIM + half + i];
        var i0 = 2u * i;
        var i1 = 2u * i + 1u;
        if (NEOX == 1u) {
            i0 = i;
            i1 = i + half;
        }
        let a = hv[i0];
        let b = hv[i1];
        // explicit fma (ref_rope's): a compiler fusing a * c - b * sn its own way changed the bits
        let r0 = fma(a, c, -(b * sn));
        let r1 = fma(a, sn, b * c);
        if (is_k) {
            kc[d + i0] = r0;
            kc[d + i1] = r1;
        } else {
            qkv[d + i0] = r0;
            qkv[d + i1] = r1;
        }
    }
}
