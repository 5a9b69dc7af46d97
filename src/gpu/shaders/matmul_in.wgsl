// matmul_in.wgsl — what matmul_vec reads as its input x, one pair of functions per mode: X
// itself (plain), or X RMS-normed by the weight NORM_W (normed: the layer's RMSNorm fused into
// decode's matmuls, so the norm costs no dispatch of its own). The glue the C side writes picks:
//   fn x_begin(l: u32) { x_begin_<mode>(l); }   called once by every lane, in uniform control flow
//   fn x_at(col: u32) -> f32 { return x_at_<mode>(col); }
// Normed, every workgroup computes the row's scale itself (the row is short: n_embd) as
// rmsnorm.wgsl does — each lane's strided squares in index order, a tree over WG = 64 lanes
// (reduce.wgsl), x * scale * w — so its inputs are rmsnorm.wgsl's outputs bit for bit — and
// stages the normed row in workgroup memory once: x_at then reads it there, since lanes
// reading scattered words of a uniform are served one address at a time (on the H200 that
// made the normed [Wgate; Wup] matmul 8x slower than a plain one). NORM_W is bound only in
// normed mode, at binding NORM_AT; a uniform, so the kernel keeps to 4 storage buffers with a
// bias. NORM_COLS: COLS normed, 1 plain (gpu_matmul_can_norm bounds it). NORM_LANES: rmsnorm's
// workgroup size (WG here is a power of two at least that).

@group(0) @binding(NORM_AT) var<uniform> NORM_W: array<vec4<f32>, NORM_VEC4>; // (COLS), padded

var<workgroup> x_normed: array<f32, NORM_COLS>;

fn x_begin_plain(l: u32) {}
fn x_at_plain(col: u32) -> f32 { return X[col]; }

fn x_begin_normed(l: u32) {
    // rmsnorm.wgsl's order: NORM_LANES (its WG) strided sums; lanes past them add 0 to the
    // tree's first level, which leaves every sum as the NORM_LANES-lane tree makes it
    var ss = 0.0;
    for (var i = l; l < NORM_LANES && i < COLS; i += NORM_LANES) { ss += X[i] * X[i]; }
    let scale = 1.0 / sqrt(wg_sum(ss, l) / f32(COLS) + EPS);
    for (var v = l; v < NORM_VEC4; v += WG) { // a vec4 of the uniform a read: 4x fewer of them
        let w = NORM_W[v];
        for (var k = 0u; k < 4u; k++) {
            let i = 4u * v + k;
            if (i < COLS) { x_normed[i] = X[i] * scale * w[k]; }
        }
    }
    workgroupBarrier();
}
fn x_at_normed(col: u32) -> f32 { return x_normed[col]; }
