// lora_up.wgsl — y += B' t for a group of adapted weights (gpu/lora.c), the twin of ops_ref.c's
// ref_lora_up. The group's up to three weights add to adjacent columns of y: rows [0, E0),
// [E0, E1), [E1, ROWS), each of its own rank R0, R1, R2 (0: not adapted, nothing added), its
// B' (rows, rank; each term's B times its scale s, the terms side by side) at float B0 = 0, B1,
// B2 of B, and its part of t at column 0, R0, R0 + R1. Row o of weight j:
// y[tok, Y_COL + o] += sum over r < R_j of B'_j[o - start_j, r] t[tok, t0_j + r].
// Invocation (o, tok): one output of one token; workgroups (ceil(ROWS / WG), n_tok).
// Constants: WG, ROWS, R (R0 + R1 + R2), Y_STRIDE (floats per token row of y), Y_COL, E0, E1,
// R0, R1, R2, B1, B2.
@group(0) @binding(0) var<storage, read> B: array<f32>;       // the weights' B' one after another
@group(0) @binding(1) var<storage, read> T: array<f32>;       // (n_tok, R): lora_down's
@group(0) @binding(2) var<storage, read_write> Y: array<f32>; // (n_tok, Y_STRIDE)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = gid.x;
    if (o >= ROWS) { return; }
    let s1 = o >= E0;
    let s2 = o >= E1;
    let rn = select(select(R0, R1, s1), R2, s2);
    if (rn == 0u) { return; }
    let start = select(select(0u, E0, s1), E1, s2);
    let t0 = gid.y * R + select(select(0u, R0, s1), R0 + R1, s2);
    let b0 = select(select(0u, B1, s1), B2, s2) + (o - start) * rn;
    var acc = 0.0;
    for (var r = 0u; r < rn; r++) {
        acc += B[b0 + r] * T[t0 + r];
    }
    let i = gid.y * Y_STRIDE + Y_COL + o;
    Y[i] = Y[i] + acc;
}
