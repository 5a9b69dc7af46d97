// matmul_combine.wgsl — the end of a prefill matmul split over its columns (matmul_tiled.wgsl,
// KSPLIT > 1): output o of token t is the sum of the splits' partial sums, split 0 first, then
// the mode's function of matmul_out.wgsl (y_out), as matmul_tiled applies it when not split.
// Part buffer P: row r of token t from split ks at (ks * n_tok + t) * ROWS + r (ROWS = NW * OUTS:
// in SWIGLU mode output o's up row is o + OUTS).
//
// Workgroup (wid.x, wid.y): outputs wid.x * WG .. (one an invocation, so a warp reads P and
// writes Y in runs), tokens wid.y * CT .. + CT.
// Constants: WG, CT, KSPLIT, ROWS, NW, OUTS, Y_STRIDE, Y_COL, BIAS_AT and the rest of
// matmul_out.wgsl's. Bindings: 0 P, 1 y, 2 step; 3 bias (BIAS mode).

struct Step { n_tok: u32, pos: u32, a: u32, b: u32 }

@group(0) @binding(0) var<storage, read> P: array<f32>;
@group(0) @binding(1) var<storage, read_write> Y: array<f32>;
@group(0) @binding(2) var<uniform> step: Step;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let n_tok = step.n_tok;
    let o = wid.x * WG + l;
    if (o >= OUTS) { return; }
    for (var j = 0u; j < CT; j++) {
        let t = wid.y * CT + j;
        if (t >= n_tok) { return; }
        var a = P[t * ROWS + o];
        var b = 0.0;
        if (NW == 2u) { b = P[t * ROWS + o + OUTS]; }
        for (var ks = 1u; ks < KSPLIT; ks++) {
            let i = (ks * n_tok + t) * ROWS + o;
            a += P[i];
            if (NW == 2u) { b += P[i + OUTS]; }
        }
        y_out(t * Y_STRIDE + Y_COL + o, o, a, b);
    }
}
