// matmul_out_add.wgsl — GPU_MM_ADD's y_out (matmul_out.wgsl): y += W x, the residual add
// (ops_ref.c's x += proj) fused into Wo and Wdown.
fn y_out(i: u32, o: u32, a: f32, b: f32) { Y[i] = Y[i] + a; }
