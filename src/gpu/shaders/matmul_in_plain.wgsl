// matmul_in_plain.wgsl — matmul_vec's input x as it is (matmul_in.wgsl: x_begin, x4_at).
fn x_begin(l: u32, xr: u32) {}
fn x4_at(xr: u32, col: u32) -> vec4<f32> { return x4_mask(X[xr + (col >> 2u)], col); }
