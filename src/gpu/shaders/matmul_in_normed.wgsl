// matmul_in_normed.wgsl — matmul_vec's input x RMS-normed by NORM_W (matmul_in.wgsl: x_begin,
// x4_at): every workgroup sums the row's squares as rmsnorm.wgsl does, then reads x * scale * w.
fn x_begin(l: u32, xr: u32) {
    var ss = 0.0;
    for (var k = 0u; k < NORM_VPL; k++) { // a constant count, so the loads can go out together
        let v = l + k * NORM_LANES;
        if (l < NORM_LANES && v < X_VEC4) {
            let x = x4_mask(X[xr + v], 4u * v);
            ss += dot(x, x);
        }
    }
    let sc = 1.0 / sqrt(wg_sum(ss, l) / f32(COLS) + EPS);
    if (l == 0u) { norm_scale = sc; }
    workgroupBarrier();
}
fn x4_at(xr: u32, col: u32) -> vec4<f32> {
    let v = col >> 2u;
    return x4_mask(X[xr + v] * norm_scale * NORM_W[v], col);
}
