// matmul_out_set.wgsl — GPU_MM_SET's y_out (matmul_out.wgsl): y = W x.
fn y_out(i: u32, o: u32, a: f32, b: f32) { Y[i] = a; }
