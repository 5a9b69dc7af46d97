// rope.wgsl — rotary position embedding of every head of the call's tokens, as ops_ref.c's
// ref_rope_angles + ref_rope compute it:
//   theta_i = (pos * theta_scale^i) / freq_factor_i, theta_scale^i by repeated multiplication
//   in f32 (ggml's rope cache; the host computes theta_scale = base^(-2 / head_dim) with powf)
//   NORM rotates the pairs (2i, 2i+1), NEOX the pairs (i, i + HEAD_DIM / 2).
// cos and sin are this file's own (sincos below), not WGSL's builtins: those promise only an
// absolute error of 2^-11, and only on [-pi, pi], while angles reach n_ctx radians.
// Out of place: src row t -> dst row t (queries) or row pos + t (AT_POS = 1: keys, written
// straight into the layer's key cache — the KV write). Invocation (pair index over all heads,
// token); workgroups (ceil(N_HEADS * HEAD_DIM / 2 / WG), n_tok).
// Constants: N_HEADS, HEAD_DIM, NEOX (0 / 1), AT_POS (0 / 1), WG.
@group(0) @binding(0) var<uniform> step: Step;
@group(0) @binding(1) var<storage, read> src: array<f32>;       // (n_batch, N_HEADS * HEAD_DIM)
@group(0) @binding(2) var<storage, read_write> dst: array<f32>; // (n_batch or n_ctx, N_HEADS * HEAD_DIM)
@group(0) @binding(3) var<storage, read> freqs: array<f32>;     // theta_scale, then HEAD_DIM / 2 factors

// (cos x, sin x) for |x| < 2^16 or so, within a few ulp: x = q * pi/2 + r with pi/2 split in
// three parts (Cody-Waite; P1 has 8 significant bits, so q * P1 is exact while q < 2^16), then
// cephes' sinf / cosf polynomials on |r| <= pi/4, the quadrant choosing sign and order.
fn sincos(x: f32) -> vec2<f32> {
    let q = round(x * 0.636619772367581343);
    let r = ((x - q * 1.5703125) - q * 4.837512969970703125e-4) - q * 7.54978995489188216e-8;
    let z = r * r;
    let s = r + r * z * (-1.6666654611e-1 + z * (8.3321608736e-3 + z * -1.9515295891e-4));
    let c = 1.0 - 0.5 * z + z * z * (4.166664568298827e-2 + z * (-1.388731625493765e-3 + z * 2.443315711809948e-5));
    switch (i32(q) & 3) {
        case 0: { return vec2<f32>(c, s); }
        case 1: { return vec2<f32>(-s, c); }
        case 2: { return vec2<f32>(-c, -s); }
        default: { return vec2<f32>(s, -c); }
    }
}

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let half = HEAD_DIM / 2u;
    if (gid.x >= N_HEADS * half) { return; }
    let h = gid.x / half;
    let i = gid.x % half;
    let t = gid.y;
    var theta = f32(step.pos + t);
    for (var k = 0u; k < i; k++) { theta *= freqs[0]; }
    let cs = sincos(theta / freqs[1u + i]);
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
    dst[d + i0] = a * cs.x - b * cs.y;
    dst[d + i1] = a * cs.y + b * cs.x;
}
