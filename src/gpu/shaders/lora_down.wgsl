// lora_down.wgsl — t = A x for one adapted weight (gpu/lora.c), the twin of ops_ref.c's
// ref_lora_down: t[tok, r] = sum over c of A[r, c] x[tok, c], the terms' A stacked (R rows).
// Workgroup (r, tok): lane l sums columns l, l + WG, ...; a tree in workgroup memory adds the
// lanes' sums in a fixed order.
// Constants: WG (a power of two), COLS (the weight's columns), R (the terms' ranks summed),
// X_STRIDE (floats per token row of x).
@group(0) @binding(0) var<storage, read> A: array<f32>;       // (R, COLS)
@group(0) @binding(1) var<storage, read> X: array<f32>;       // (n_tok, X_STRIDE), the input at column 0
@group(0) @binding(2) var<storage, read_write> T: array<f32>; // (n_tok, R)

var<workgroup> sums: array<f32, WG>;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) lane: u32) {
    let r = wid.x;
    let tok = wid.y;
    var acc = 0.0;
    for (var c = lane; c < COLS; c += WG) {
        acc += A[r * COLS + c] * X[tok * X_STRIDE + c];
    }
    sums[lane] = acc;
    workgroupBarrier();
    for (var h = WG / 2u; h > 0u; h = h / 2u) {
        if (lane < h) { sums[lane] += sums[lane + h]; }
        workgroupBarrier();
    }
    if (lane == 0u) { T[tok * R + r] = sums[0]; }
}
