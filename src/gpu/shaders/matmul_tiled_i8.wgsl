// matmul_tiled_i8.wgsl — matmul_tiled.wgsl's product on 8-bit integer dot products, for every
// quantized format: x quantized as the CPU backend quantizes it (src/cpu/quant_act.c: blocks
// of 32 columns, d = max |x| / 127, quants x * 127 / max |x| rounded half to even), each
// 32-weight block's products summed exactly in i32 by dot4I8Packed (in two 16-column halves),
// then one float step a block, the format's block_step (formats.wgsl: its three forms), e.g.
//   acc = fma(d_w * d_x, f32(sum q_w q_x - ZERO * sum q_x), acc)   (ZERO = 8 for Q4_0, 0 for Q8_0)
// block by block in column order: for Q8_0 and Q4_0 the CPU backend's arithmetic
// (lean_legacy_step), up to the quantizer's two divisions (WGSL allows them 2.5 ulp) and the
// fma, which the CPU rounds twice. The K-quants take x in 32-column blocks too (the CPU's
// Q8_K has 256), so their sums are not the CPU backend's. Y is not the F32 path's: each 8-bit
// input errs by up to d_x / 2 (tests/test_cpu_backend.c says what that does to a model's
// logits; test_gpu_weights holds each matmul to it).
//
// Shape, workgroup index, split and output as matmul_tiled.wgsl (the same constants and
// bindings, from tiled_common.wgsl). Each 128-column step first quantizes X[tokens of the
// tile][columns of the step] into workgroup memory: one (token, block) a lane, 32 quants as 8
// words (2 vec4) plus (d, sum of the quants) and the first 16's sum (kept by tiled_i8_halves.wgsl
// where block_step reads it, dropped by tiled_i8_sums.wgsl elsewhere); then every invocation
// takes each 32-column block of its TR rows once (formats.wgsl's block_i8) and dots it with its
// TT tokens' quants: 8 dot4I8Packed, a few integer operations and 3 or more float operations
// for 32 multiply-adds, where matmul_tiled issues 32 fmas.

const BPS: u32 = KSTEP / 32u; // blocks per step

var<workgroup> xq: array<vec4<u32>, 2u * TILE_T * BPS>; // (token, block) e: xq[2e], xq[2e + 1]
var<workgroup> xd: array<vec2<f32>, TILE_T * BPS>;      // e: (d, sum of its quants)
const NB: u32 = COLS / 32u; // 32-column blocks a row

@compute @workgroup_size(WG)
fn main(@builtin(workgroup_id) wid: vec3<u32>, @builtin(local_invocation_index) l: u32) {
    let tl = tile_at(wid);
    if (!tl.live) { return; }
    let n_tok = step.n_tok;
    let o = tl.o0 + l % GR; // the invocation's first output
    let gt = l / GR;
    var acc: array<f32, TR * TT>; // acc[i * TT + j]
    for (var s = tl.s0; s < tl.s1; s++) {
        for (var e = l; e < TILE_T * BPS; e += WG) { x_quantize(e, tl.t0 + e / BPS, s * KSTEP + 32u * (e % BPS), n_tok); }
        workgroupBarrier();
        let b0 = s * BPS;
        for (var b = b0; b < min(b0 + BPS, NB); b++) {
            var w: array<BI8, TR>;
            for (var i = 0u; i < TR; i++) { w[i] = block_i8(tile_row(o, i), b); }
            for (var j = 0u; j < TT; j++) {
                let e = (gt + GT * j) * BPS + b - b0;
                let x0 = xq[2u * e];
                let x1 = xq[2u * e + 1u];
                let dx = xd[e];
                let x = XB(dx.x, i32(dx.y), xh_get(e));
                for (var i = 0u; i < TR; i++) {
                    let q = w[i].q;
                    let p = vec2<i32>(dot4I8Packed(q[0], x0.x) + dot4I8Packed(q[1], x0.y) + dot4I8Packed(q[2], x0.z) +
                                          dot4I8Packed(q[3], x0.w),
                                      dot4I8Packed(q[4], x1.x) + dot4I8Packed(q[5], x1.y) + dot4I8Packed(q[6], x1.z) +
                                          dot4I8Packed(q[7], x1.w));
                    acc[i * TT + j] = block_step(w[i], p, x, acc[i * TT + j]);
                }
            }
        }
        workgroupBarrier();
    }
    tile_store(&acc, o, tl.t0 + gt, tl.ks);
}

// token t's columns col .. col + 31 quantized into entry e (zeros past n_tok and COLS): d and
// the quants as quant_act.c's quantize_block makes them; max |x| compared as bits, so a NaN
// wins it and makes d NaN, as there
fn x_quantize(e: u32, t: u32, col: u32, n_tok: u32) {
    var v: array<vec4<f32>, 8>;
    var amax = 0u;
    for (var m = 0u; m < 8u; m++) {
        v[m] = vec4<f32>(0.0);
        if (t < n_tok && col < COLS) { v[m] = X[(t * COLS + col) / 4u + m]; }
        let a = bitcast<vec4<u32>>(v[m]) & vec4<u32>(0x7fffffffu);
        amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    let am = bitcast<f32>(amax);
    let d = am / 127.0;
    let id = select(0.0, 127.0 / am, d > 0.0);
    var q: array<u32, 8>;
    var sum = 0;
    var half = 0;
    for (var m = 0u; m < 8u; m++) {
        let r = clamp(vec4<i32>(round(v[m] * id)), vec4<i32>(-127), vec4<i32>(127));
        sum += (r.x + r.y) + (r.z + r.w);
        if (m == 3u) { half = sum; }
        q[m] = pack4xI8(r);
    }
    xq[2u * e] = vec4<u32>(q[0], q[1], q[2], q[3]);
    xq[2u * e + 1u] = vec4<u32>(q[4], q[5], q[6], q[7]);
    xd[e] = vec2<f32>(d, f32(sum));
    xh_put(e, half);
}
