// get_rows.wgsl — the embedding gather: out[t * COLS + col] = weight (ids[t], col), each
// weight dequantized by formats.wgsl exactly as the reference dequantizer computes it.
//
// One invocation per chunk of a row: workgroup (x, t) covers chunks x * WG .. x * WG + WG - 1
// of token t's row. An id >= ROWS (never produced by a correct forward pass) gives a row of
// zeros instead of reading outside the weight.
// Constants: ROWS COLS CHUNKS BPR SCALE_BASE CH (formats.wgsl), WG.
// Bindings: 0 W (formats.wgsl), 1 ids: (n_tok) u32, 2 out: (n_tok, cols) f32, 3 step.

struct Step { n_tok: u32, pos: u32, a: u32, b: u32 }

@group(0) @binding(1) var<storage, read> ids: array<u32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> step: Step;

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let t = wid.y;
    let c = wid.x * WG + l;
    if (t >= step.n_tok || c >= CHUNKS) { return; }
    let id = ids[t];
    if (id < ROWS) {
        dequant_chunk(id, c);
    } else {
        for (var i = 0u; i < CH; i++) { wv[i] = 0.0; }
    }
    for (var i = 0u; i < CH; i++) {
        let col = chunk_col(c, i);
        if (col < COLS) { out[t * COLS + col] = wv[i]; }
    }
}
