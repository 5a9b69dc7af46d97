// matmul_out_qkv_bias.wgsl — decode's Q, K, V epilogue with qwen2's biases (matmul_out.wgsl's
// QKV): each sum and its rotation partner's biased before the rotation, as ref_add_bias then
// qkv_post.
fn y_out(i: u32, o: u32, a: f32, b: f32) {
    let c = Y_COL + o;
    qkv_write(i, c, a + BIAS[c], b + BIAS[qkv_partner(c)]);
}
