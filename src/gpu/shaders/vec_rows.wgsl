// vec_rows.wgsl — matmul_vec.wgsl's row count in the batched decode pass: the pass's uniform
// (step.wgsl's words: n_rows first), so a dispatch of ceil(n / TPW) workgroups in z serves any
// n up to the matmul's max_rows (gpu_mm_in.rows, written by forward_batch.c before each pass).
@group(0) @binding(ROWS_AT) var<uniform> ROWS_STEP: vec4<u32>;
fn n_rows() -> u32 { return ROWS_STEP.x; }
