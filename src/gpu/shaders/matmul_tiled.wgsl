// matmul_tiled.wgsl — Y = W X for n_tok tokens (prefill): a register-blocked tiled product
// over the weight's own blocks (formats.wgsl decodes them), each output written by
// matmul_out.wgsl's y_out (set, residual add, bias, or SwiGLU of a stacked [Wgate; Wup]).
//
// A workgroup of WG = GR * GT invocations computes a tile of TILE_O = GR * OPT outputs by
// TILE_T = GT * TT tokens, OPT = TR / NW outputs per invocation, each from NW weight rows (1; 2
// in SWIGLU mode: row o and row o + OUTS). Invocation l = gt * GR + gr owns TR row slots, slot
// i holding row o(i % OPT) + (i / OPT) * OUTS with o(k) = tile_o0 + gr + GR * k, and tokens
// tile_t0 + gt + GT * j (j < TT): TR * TT accumulators in registers.
// The columns are walked in steps of KSTEP (128); each step first stages X[tokens of the
// tile][columns of the step] in workgroup memory as vec4s (zero past n_tok and COLS), then
// every invocation decodes each chunk of its rows once and dots it with its TT tokens' staged
// x, four columns a read (a chunk's columns come in runs of 4, formats.wgsl) used for all TR
// rows: one workgroup read per 4 TR multiply-adds, not per 1, which was what bound this kernel.
//
// The arithmetic (XV, the staged and decoded vec4s; PART, part_begin/fma/end, a chunk's
// sum) is tiled_f32.wgsl's or, on the f16 path, tiled_f16.wgsl's (matmul.c picks).
// Summation order of Y[t][r] (F32): one fused multiply-add per weight onto the accumulator, in
// chunk order (chunks ascending, each chunk's columns in wv order). It depends on the format
// alone, not on n_tok, the tile a token falls in or the tile's shape, so any split of a prefill
// gives the same bits. (One fma per weight, not dot() then an add per run, which was slower:
// docs/runs/2026-12-04-moved-from-src.md. The decode kernel, matmul_vec, sums in another
// order: its results are close, not equal.) The f16 path sums
// each chunk apart first, then adds it in chunk order: it too is independent of n_tok.
//
// Split over the columns (KSPLIT > 1, matmul.c chooses it for matrices whose output tiles
// alone leave most of the GPU idle): split ks of the KSPLIT sums steps [ks * SPS, ks * SPS +
// SPS) only and writes its partial sums, every row's (both of SWIGLU's), to the part buffer
// bound as Y: row r of token t at (ks * n_tok + t) * ROWS + r. matmul_combine.wgsl then adds
// the splits in order (split 0 first) and applies the output mode. So Y[t][r] is a sum of
// KSPLIT fma chains, each in chunk order; KSPLIT and SPS are the matrix's, never n_tok's, and
// the bits still do not depend on how a prefill is cut.
// (Split, matmul.c compiles the kernel with matmul_out_set.wgsl's y_out, so it binds no bias.)
//
// The bindings, the workgroup's tile (tile_at) and the outputs (tile_store) are
// tiled_common.wgsl's, shared with matmul_tiled_i8.wgsl (the 8-bit prefill).
// Constants: ROWS COLS CHUNKS BPR SCALE_BASE CH (formats.wgsl), GR GT TR TT KSTEP NX PF, NW,
// OUTS (= ROWS / NW), TILES_O, KSPLIT, SPS, Y_STRIDE, Y_COL, BIAS_AT (matmul_out.wgsl).
// Bindings: 0 W (formats.wgsl), 1 x: (n_tok, cols) f32, 2 y: f32, output o of token t at
// t * Y_STRIDE + Y_COL + o (the part buffer when KSPLIT > 1), 3 step; 4 bias (BIAS mode, not
// split).

const CPS: u32 = KSTEP / CH; // chunks per step
const KV4: u32 = KSTEP / 4u;  // vec4s of a token's staged columns

var<workgroup> xs: array<XV, TILE_T * KV4>; // xs[tl * KV4 + (column - step start) / 4]

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let tl = tile_at(wid);
    if (!tl.live) { return; }
    let n_tok = step.n_tok;
    let o = tl.o0 + l % GR; // the invocation's first output
    let gt = l / GR;
    var acc: array<f32, TR * TT>; // acc[i * TT + j]
    for (var s = tl.s0; s < tl.s1; s++) {
        let k0 = s * KSTEP;
        for (var e = l; e < TILE_T * KV4; e += WG) {
            xs[e] = to_xv(x_stage(tl.t0 + e / KV4, k0 + 4u * (e % KV4), n_tok));
        }
        workgroupBarrier();
        // chunks come a group at a time (formats.wgsl: GCH chunks from one set of loads); the
        // step's chunks are whole groups (GCH divides CPS and CHUNKS)
        // PF = 1: the next group's loads are issued before this group's sums, so they wait
        // behind its multiply-adds, not in front of the next ones
        let g0 = s * (CPS / GCH);
        let g_end = min(s * CPS + CPS, CHUNKS) / GCH;
        var next: array<GRAW, TR>;
        if (PF == 1u) {
            for (var i = 0u; i < TR; i++) { next[i] = chunk_group(tile_row(o, i), g0); }
        }
        for (var g = g0; g < g_end; g++) {
            var raw: array<GRAW, TR>;
            for (var i = 0u; i < TR; i++) {
                let row = tile_row(o, i);
                if (PF == 1u) {
                    raw[i] = next[i];
                    next[i] = chunk_group(row, min(g + 1u, g_end - 1u)); // the last group's again: unused
                } else {
                    raw[i] = chunk_group(row, g);
                }
            }
            for (var k = 0u; k < GCH; k++) {
                let c = g * GCH + k;
                var w: array<XV, TR * RUNS>; // w[i * RUNS + q]: run q of chunk c of row slot i
                for (var i = 0u; i < TR; i++) {
                    group_chunk(raw[i], k);
                    for (var q = 0u; q < RUNS; q++) { w[i * RUNS + q] = to_xv(wv4(q)); }
                }
                for (var j = 0u; j < TT; j++) {
                    let xrow = (gt + GT * j) * KV4;
                    var p: array<PART, TR>;
                    for (var i = 0u; i < TR; i++) { p[i] = part_begin(acc[i * TT + j]); }
                    for (var q = 0u; q < RUNS; q++) {
                        let x4 = xs[xrow + (chunk_col(c, 4u * q) - k0) / 4u]; // read once for all TR rows
                        for (var i = 0u; i < TR; i++) { p[i] = part_fma(p[i], w[i * RUNS + q], x4); }
                    }
                    for (var i = 0u; i < TR; i++) { acc[i * TT + j] = part_end(acc[i * TT + j], p[i]); }
                }
            }
        }
        workgroupBarrier();
    }
    tile_store(&acc, o, tl.t0 + gt, tl.ks);
}

// columns col .. col + 3 of token t's input, 0 past n_tok and COLS (col % 4 = 0)
fn x_stage(t: u32, col: u32, n_tok: u32) -> vec4<f32> {
    var v = vec4<f32>(0.0);
    if (t >= n_tok || col >= COLS) { return v; }
    let e = t * COLS + col;
    if (COLS % 4u == 0u) { return X[e >> 2u]; } // a row starts on a vec4: one load
    for (var k = 0u; k < 4u; k++) {
        if (col + k < COLS) { v[k] = X[(e + k) >> 2u][(e + k) & 3u]; }
    }
    return v;
}
