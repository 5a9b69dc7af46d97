// rope.wgsl — rotary position embedding of every head of the call's tokens, as ops_ref.c's
// ref_rope computes it: NORM rotates the pairs (2i, 2i+1), NEOX the pairs (i, i + HEAD_DIM / 2),
// by angle i of the token's position.
// No angle and no sin/cos is computed here: the table holds ref_rope_angles' own cos and sin
// of every position (ops.c, gpu_rope_table_create). GPU compilers may contract or reassociate
// a range reduction (NVIDIA's lost 1e-4 rad at angles ~4000), and WGSL's sin/cos promise only
// 2^-11 on [-pi, pi]; the host's bits are the reference's bits on every device.
// Out of place: src row t -> dst row t (queries) or row pos + t (AT_POS = 1: keys, written
// straight into the layer's key cache — the KV write). Invocation (pair index over all heads,
// token); workgroups (ceil(N_HEADS * HEAD_DIM / 2 / WG), n_tok).
// Constants: N_HEADS, HEAD_DIM, NEOX (0 / 1), AT_POS (0 / 1), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> src: array<f32>;       // (n_batch, N_HEADS * HEAD_DIM)
@group(0) @binding(2) var<storage, read_write> dst: array<f32>; // (n_batch or n_ctx, N_HEADS * HEAD_DIM)
@group(0) @binding(3) var<storage, read> table: array<f32>;     // (n_ctx, HEAD_DIM): cos (HEAD_DIM / 2), then sin

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = HEAD_DIM / 2u;
    if (gid.x >= N_HEADS * half) { return; }
    let h = gid.x / half;
    let i = gid.x % half;
    let t = gid.y;
    let angle = (step.pos + t) * HEAD_DIM + i;
    let c = table[angle];
    let sn = table[angle + half];
    var i0 = 2u * i;
    var i1 = 2u * i + 1u;
    if (NEOX == 1u) {
        i0 = i;
        i1 = i + half;
    }
    var row = t;
    if (AT_POS == 1u) { row = step.pos + t; }
    let s = t * N_HEADS * HEAD_DIM + h * HEAD_DIM;
    let d = row * N_HEADS * HEAD_DIM + h * HEAD_DIM;
    let a = src[s + i0];
    let b = src[s + i1];
    dst[d + i0] = a * c - b * sn;
    dst[d + i1] = a * sn + b * c;
}
