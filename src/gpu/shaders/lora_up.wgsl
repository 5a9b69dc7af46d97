// lora_up.wgsl — y += B' t for one adapted weight (gpu/lora.c), the twin of ops_ref.c's
// ref_lora_up: B' holds each term's B times its scale s, the terms side by side (R columns),
// so y[tok, Y_COL + o] += sum over r of B'[o, r] t[tok, r].
// Invocation (o, tok): one output of one token; workgroups (ceil(ROWS / WG), n_tok).
// Constants: WG, ROWS (the weight's rows), R, Y_STRIDE (floats per token row of y), Y_COL.
@group(0) @binding(0) var<storage, read> B: array<f32>;       // (ROWS, R)
@group(0) @binding(1) var<storage, read> T: array<f32>;       // (n_tok, R): lora_down's
@group(0) @binding(2) var<storage, read_write> Y: array<f32>; // (n_tok, Y_STRIDE)

@compute @workgroup_size(WG)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    let o = gid.x;
    if (o >= ROWS) { return; }
    let tok = gid.y;
    var acc = 0.0;
    for (var r = 0u; r < R; r++) {
        acc += B[o * R + r] * T[tok * R + r];
    }
    let i = tok * Y_STRIDE + Y_COL + o;
    Y[i] = Y[i] + acc;
}
