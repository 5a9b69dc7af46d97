// vec_one.wgsl — matmul_vec.wgsl's row count for decode: one row (TPW = 1, one workgroup in z).
fn n_rows() -> u32 { return 1u; }
