// matmul_tiled.wgsl — Y = W X for n_tok tokens (prefill): a register-blocked tiled product
// over the weight's own blocks (formats.wgsl decodes them).
//
// A workgroup of WG = GR * GT invocations computes a tile of TILE_R = GR * TR rows by
// TILE_T = GT * TT tokens. Invocation l = gt * GR + gr owns rows tile_r0 + gr + GR * i
// (i < TR) and tokens tile_t0 + gt + GT * j (j < TT): TR * TT accumulators in registers.
// The columns are walked in steps of KSTEP (128); each step first stages X[tokens of the
// tile][columns of the step] in workgroup memory (zero past n_tok and COLS), then every
// invocation decodes each chunk of its rows once and dots it with its TT tokens' staged x.
//
// Summation order of Y[t][r]: chunks in ascending order, each chunk's CH products summed in
// i order into a chunk sum that is added to the accumulator. It depends on CH alone, not on
// n_tok or the tile a token falls in, so any split of a prefill gives the same bits. (The
// decode kernel, matmul_vec, sums in another order: its results are close, not equal.)
//
// Workgroup index: rows tile wid.y * NX + wid.x (split like matmul_vec), tokens tile wid.z.
// Constants: ROWS COLS CHUNKS BPR SCALE_BASE CH (formats.wgsl), GR GT TR TT KSTEP NX.
// Bindings: 0 W (formats.wgsl), 1 x: (n_tok, cols) f32, 2 y: (n_tok, rows) f32, 3 step.

struct Step { n_tok: u32, pos: u32, a: u32, b: u32 }

@group(0) @binding(1) var<storage, read> X: array<f32>;
@group(0) @binding(2) var<storage, read_write> Y: array<f32>;
@group(0) @binding(3) var<uniform> step: Step;

const WG: u32 = GR * GT;
const TILE_R: u32 = GR * TR;
const TILE_T: u32 = GT * TT;
const CPS: u32 = KSTEP / CH; // chunks per step

var<workgroup> xs: array<f32, TILE_T * KSTEP>; // xs[tl * KSTEP + column - step start]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let n_tok = step.n_tok;
    let tile_r0 = (wid.y * NX + wid.x) * TILE_R;
    let tile_t0 = wid.z * TILE_T;
    if (tile_r0 >= ROWS || tile_t0 >= n_tok) { return; } // uniform over the workgroup
    let gr = l % GR;
    let gt = l / GR;
    var acc: array<f32, TR * TT>; // acc[i * TT + j]
    let n_steps = (COLS + KSTEP - 1u) / KSTEP;
    for (var s = 0u; s < n_steps; s++) {
        let k0 = s * KSTEP;
        for (var e = l; e < TILE_T * KSTEP; e += WG) {
            let t = tile_t0 + e / KSTEP;
            let col = k0 + e % KSTEP;
            var v = 0.0;
            if (t < n_tok && col < COLS) { v = X[t * COLS + col]; }
            xs[e] = v;
        }
        workgroupBarrier();
        let c_end = min(s * CPS + CPS, CHUNKS);
        for (var c = s * CPS; c < c_end; c++) {
            for (var i = 0u; i < TR; i++) {
                dequant_chunk(min(tile_r0 + gr + GR * i, ROWS - 1u), c);
                for (var j = 0u; j < TT; j++) {
                    let xrow = (gt + GT * j) * KSTEP;
                    var d = 0.0;
                    for (var k = 0u; k < CH; k++) { d += wv[k] * xs[xrow + chunk_col(c, k) - k0]; }
                    acc[i * TT + j] += d;
                }
            }
        }
        workgroupBarrier();
    }
    for (var i = 0u; i < TR; i++) {
        let r = tile_r0 + gr + GR * i;
        for (var j = 0u; j < TT; j++) {
            let t = tile_t0 + gt + GT * j;
            if (r < ROWS && t < n_tok) { Y[t * ROWS + r] = acc[i * TT + j]; }
        }
    }
}
