// matmul_out_bias.wgsl — GPU_MM_BIAS's y_out (matmul_out.wgsl): y = W x + bias, qwen2's q, k, v
// biases (ref_add_bias).
fn y_out(i: u32, o: u32, a: f32, b: f32) { Y[i] = a + BIAS[Y_COL + o]; }
