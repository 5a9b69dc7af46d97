// matmul_out.wgsl — what matmul_vec and matmul_tiled do with an output, one function per
// mode of gpu_mm_mode (weights.h), each in its own file compiled after this one
// (matmul_out_<mode>.wgsl: set, add, bias, swiglu, qkv, qkv_bias). The kernel calls
//   fn y_out(i: u32, o: u32, a: f32, b: f32)
// with i the element of Y (t * Y_STRIDE + Y_COL + o), o the output, a = (W x)[o] and, in SWIGLU
// mode only, b = (W x)[o + OUTS] (Wup's row). Each one is the reference op's expression
// (ops_ref.c: the residual x += proj, ref_add_bias, ref_swiglu; swiglu.wgsl is the unfused
// twin), one rounding after the sum as there.
// BIAS is bound only where a bias mode uses it, at binding BIAS_AT (after the kernel's own bindings);
// it is laid out as a row of Y: output o's bias at Y_COL + o (one bias serves Q, K and V
// written as columns of one row, stacked or not).
//
// QKV (qkv, qkv_bias; decode's matmul_vec only, KV_MODE 1: weights.h's gpu_mm_kv) is
// qkv_post.wgsl's work done on the matmul's outputs, columns Y_COL + o of the q | k | v row:
// the bias added (qkv_bias), then q and k rotated by RoPE at the step's position with the
// table's cos and sin, q written to Y, k to the key cache row pos, v (unrotated) to the value
// cache row pos. A rotation takes both outputs of a pair — (2i, 2i + 1) of a head, or
// (i, i + HEAD_DIM / 2) in NEOX — so the kernel computes them in one workgroup: out_of(n)
// orders a head's outputs pair by pair, and b is the partner's sum. Its bindings follow the
// kernel's others, from KV_AT.
// Constants: KV_MODE, KV_AT, NEOX, HEAD_DIM, Q_DIM, KV_DIM (unused where KV_MODE is 0).

@group(0) @binding(BIAS_AT) var<storage, read> BIAS: array<f32>; // (Y_COL + OUTS)

@group(0) @binding(KV_AT) var<uniform> KV_STEP: vec4<u32>;            // step.wgsl's Step: .y = pos
@group(0) @binding(KV_AT + 1u) var<storage, read_write> KC: array<f32>; // (n_ctx, KV_DIM)
@group(0) @binding(KV_AT + 2u) var<storage, read_write> VC: array<f32>; // (n_ctx, KV_DIM)
@group(0) @binding(KV_AT + 3u) var<storage, read> ROPE: array<f32>;    // (n_ctx, HEAD_DIM): cos, sin

// the output a workgroup's slot n computes: n, or in NEOX's QKV mode the pairs (i, i + half) of
// each head made neighbours (2i, 2i + 1)
fn out_of(n: u32) -> u32 {
    if (KV_MODE == 0u || NEOX == 0u) { return n; }
    let r = n % HEAD_DIM;
    return n - r + r / 2u + (r % 2u) * (HEAD_DIM / 2u);
}

// the column paired with column c of q | k | v by the rotation
fn qkv_partner(c: u32) -> u32 {
    let r = c % HEAD_DIM;
    if (NEOX == 1u) { return select(c - HEAD_DIM / 2u, c + HEAD_DIM / 2u, r < HEAD_DIM / 2u); }
    return select(c - 1u, c + 1u, r % 2u == 0u);
}

// column c's value x, its partner's y: v written, q and k rotated as qkv_post does
fn qkv_write(i: u32, c: u32, x: f32, y: f32) {
    let pos = KV_STEP.y;
    if (c >= Q_DIM + KV_DIM) {
        VC[pos * KV_DIM + c - Q_DIM - KV_DIM] = x;
        return;
    }
    let half = HEAD_DIM / 2u;
    let r = c % HEAD_DIM;
    let first = select(r % 2u == 0u, r < half, NEOX == 1u); // rotated as x cos - y sin
    let ai = select(r / 2u, r % half, NEOX == 1u);          // the angle's index
    let cs = ROPE[pos * HEAD_DIM + ai];
    let sn = ROPE[pos * HEAD_DIM + half + ai];
    var v = fma(y, sn, x * cs); // qkv_post_head's fma(a, sin, b cos), x the second of the pair
    if (first) { v = fma(x, cs, -(y * sn)); }
    if (c < Q_DIM) { Y[i] = v; } else { KC[pos * KV_DIM + c - Q_DIM] = v; }
}
