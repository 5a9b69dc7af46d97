// vec_rows.wgsl — matmul_vec's row count where a workgroup takes TPW > 1 rows of a batch: the
// first word of the uniform the batched pass writes (step.wgsl's n_tok), at binding 3.
@group(0) @binding(3) var<uniform> ROWS_STEP: vec4<u32>;
fn vec_rows() -> u32 { return ROWS_STEP.x; }
