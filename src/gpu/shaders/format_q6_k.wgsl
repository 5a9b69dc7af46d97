// format_q6_k.wgsl — Q6_K weights under the names the weight kernels call: formats.wgsl's
// q6_k functions (weight_kernel.c compiles this file after formats.wgsl for a Q6_K matrix).

// a chunk's weights into wv, and their columns (get_rows, matmul_tiled, matmul_vec)
fn dequant_chunk(row: u32, c: u32) { dq_q6_k(row, c); }
fn chunk_col(c: u32, i: u32) -> u32 { return col_q6_k(c, i); }

// matmul_tiled's groups: one chunk a group
const GCH: u32 = 1u;
fn chunk_group(row: u32, g: u32) -> GRAW { return gl_any(row, g); }
fn group_chunk(r: GRAW, k: u32) { gd_any(r, k); }

// matmul_tiled_i8's 32-column blocks: 32 quants in two 16-column sub-blocks, the weights
// d sc (q - 32) (formats.wgsl's two form)
fn block_i8(row: u32, b: u32) -> BI8 { return bi_q6_k(row, b); }
fn block_step(w: BI8, p: vec2<i32>, x: XB, acc: f32) -> f32 { return bs_two(w, p, x, acc); }

// matmul_vec's chunk dot: the chunk decoded, then dotted with x run by run
alias VRAW = VR_dq;
fn chunk_vload(row: u32, c: u32) -> VRAW { return vl_dq(row, c); }
fn chunk_vdot(r: VRAW, acc: f32, x: XRUNS) -> f32 { return vd_dq(r, acc, x); }
