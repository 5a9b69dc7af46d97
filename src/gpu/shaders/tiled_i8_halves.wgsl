// matmul_tiled_i8's half sums for the formats whose block_step reads x.h (formats.wgsl's bs_two
// and bs_two_min: Q2_K, Q3_K, Q6_K; matmul.c's i8_halves picks this file or tiled_i8_sums.wgsl)

var<workgroup> xh: array<i32, TILE_T * BPS>; // e: the sum of its first 16 quants

fn xh_put(e: u32, h: i32) { xh[e] = h; }
fn xh_get(e: u32) -> i32 { return xh[e]; }
