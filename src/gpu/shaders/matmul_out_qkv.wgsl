// matmul_out_qkv.wgsl — decode's Q, K, V epilogue without a bias (matmul_out.wgsl's QKV):
// column Y_COL + o of the q | k | v row, b its rotation partner's sum.
fn y_out(i: u32, o: u32, a: f32, b: f32) { qkv_write(i, Y_COL + o, a, b); }
