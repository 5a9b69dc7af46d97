// format_q8_0.wgsl — Q8_0 weights under the names the weight kernels call: formats.wgsl's
// q8_0 functions (weight_kernel.c compiles this file after formats.wgsl for a Q8_0 matrix).

// a chunk's weights into wv, and their columns (get_rows, matmul_tiled, matmul_vec)
fn dequant_chunk(row: u32, c: u32) { dq_q8_0(row, c); }
fn chunk_col(c: u32, i: u32) -> u32 { return col_q8_0(c, i); }

// matmul_tiled's groups: half a block, 2 chunks, from one vec4 load of quants
const GCH: u32 = 2u;
fn chunk_group(row: u32, g: u32) -> GRAW { return gl_q8_0(row, g); }
fn group_chunk(r: GRAW, k: u32) { gd_q8_0(r, k); }

// matmul_tiled_i8's 32-column blocks: 32 quants, the weights (q - 0) d (formats.wgsl's zero form)
fn block_i8(row: u32, b: u32) -> BI8 { return bi_q8_0(row, b); }
fn block_step(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 { return bs_zero(w, p, x, acc); }

// matmul_vec's chunk dot: the chunk decoded, then dotted with x run by run (a dot of the
// quants first was slower here: docs/runs/2026-12-04-gpu-h200-dots.md)
alias VRAW = VR_dq;
fn chunk_vload(row: u32, c: u32) -> VRAW { return vl_dq(row, c); }
fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32 { return vd_dq(r, acc, x); }
