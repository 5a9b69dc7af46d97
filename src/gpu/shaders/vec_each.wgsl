// vec_each.wgsl — matmul_vec's row count where a workgroup takes one row (TPW = 1): every
// workgroup z dispatched is a row (decode's one, or one of the batched pass's).
fn vec_rows() -> u32 { return 0xffffffffu; }
